/* fuzz_parse.c: libFuzzer target for the .qir parser and printer.
 *
 * Any input must parse or be rejected with diagnostics, never crash or hang;
 * whatever parses must print, and the printed text must reach the printer's
 * fixed point: parse(print(m)) prints the same bytes.  Built by scripts/fuzz.sh;
 * test/fuzz/standalone_main.c runs the same check on files without libFuzzer
 * (test/fixedpoint.sh, reproducing crashes). */
#include "qir.h"

#include <stdlib.h>
#include <string.h>

static FILE *devnull;

static qir_module *parse(const char *text, size_t len, qir_diag *d) {
  qir_diag_init(d, devnull, "<fuzz>", text, len);
  return qir_parse(text, len, "<fuzz>", NULL, d);
}

int qir_fuzz_roundtrip(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* 0: parsed and reached the fixed point; 1: rejected with diagnostics;
 * aborts on anything else. */
int qir_fuzz_roundtrip(const unsigned char *data, size_t size) {
  if (!devnull) devnull = fopen("/dev/null", "w");
  qir_diag d;
  qir_module *m = parse((const char *)data, size, &d);
  if (!m) {
    if (d.n_errors == 0) abort(); /* rejected without saying why */
    return 1;
  }
  size_t len1, len2;
  char *text1 = qir_print_to_string(m, &len1);
  qir_module_free(m);
  qir_module *m2 = parse(text1, len1, &d);
  if (!m2) {
    fprintf(stderr, "printed module does not parse:\n%s\n", text1);
    qir_diag_init(&d, stderr, "<printed>", text1, len1);
    qir_parse(text1, len1, "<printed>", NULL, &d);
    abort();
  }
  char *text2 = qir_print_to_string(m2, &len2);
  qir_module_free(m2);
  if (len1 != len2 || memcmp(text1, text2, len1) != 0) {
    fprintf(stderr, "printer is not a fixed point:\n--- first\n%s\n--- second\n%s\n", text1, text2);
    abort();
  }
  free(text1);
  free(text2);
  return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  qir_fuzz_roundtrip(data, size);
  return 0;
}
