/* standalone_main.c: runs the fuzz target's round-trip check on files, without
 * libFuzzer: `fuzz_standalone FILE...`.  Prints "parse-error FILE" for input
 * the parser rejects (exit status 1 if any), and aborts on a crash or on a
 * printer that is not a fixed point. */
#include <stdio.h>
#include <stdlib.h>

int qir_fuzz_roundtrip(const unsigned char *data, size_t size);

int main(int argc, char **argv) {
  int status = 0;
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) {
      perror(argv[i]);
      return 2;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
      n += got;
      if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) return 2;
    if (qir_fuzz_roundtrip(buf, n) != 0) {
      printf("parse-error %s\n", argv[i]);
      status = 1;
    }
    free(buf);
  }
  return status;
}
