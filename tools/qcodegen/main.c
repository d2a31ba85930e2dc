/* qcodegen: .qir -> one self-contained CUDA, HIP or C source file.
 *
 *   qcodegen -cuda|-hip|-c [-check] [-main] [-embed-weights] [-plant=KIND:N] [-o OUT] [FILE|-]
 *
 * Every kernel (a compute op, or a named op through its compute form) is
 * lowered to a kernel AST (kast.h) and printed by the backend's printer; the
 * host code (host.c) plans memory and sequences the launches. */
#include <stdlib.h>
#include <string.h>

#include "kast.h"

static int usage(FILE *o) {
  fputs("usage: qcodegen -cuda|-hip|-c [-check] [-main] [-embed-weights] [-o OUT] [FILE|-]\n"
        "  -cuda           CUDA C++ (.cu) for nvcc\n"
        "  -hip            HIP C++ for hipcc (64-lane wavefronts)\n"
        "  -c              C for cc -O2 [-fopenmp]: blocks as an OpenMP loop, threads as loops\n"
        "  -check          with -c: check the kernels while they run: shared-memory races, out-of-bounds\n"
        "                  and uninitialised accesses (the arena starts poisoned), divergent barriers\n"
        "                  and shuffles, unordered global accesses across blocks, read-only reads of\n"
        "                  what the same GPU launch wrote; hazards reported at the op's .qir line,\n"
        "                  qir_run returns 1 (compile without -fopenmp)\n"
        "  -wavefront64    with -c: lower for 64-lane warps as -hip does, so -check covers HIP's kernels\n"
        "  -main           add a program: ./m --in NAME=x.npy ... --out NAME=y.npy [--bench N]\n"
        "  -embed-weights  put the weights file's bytes into the source\n"
        "  -o OUT          write to OUT instead of stdout\n"
        "  -plant=KIND:N   (debug) plant a bug to show the checker catches it; KIND is drop-barrier,\n"
        "                  diverge-barrier, diverge-loop (the Nth barrier / barrier loop), shrink-smem,\n"
        "                  shift-smem, collide-smem (the Nth shared array), shift-store, collide-store,\n"
        "                  drop-lane, unorder-launch (kernel kN), drop-wait, late-wait (the Nth wait\n"
        "                  of an rprogram: gone, or on the program's last task), drop-grid-barrier\n"
        "                  (the Nth grid barrier of a device-resident loop/if), drop-store (kernel kN\n"
        "                  stores nothing), nc-written (the Nth rprogram's waves read what they do\n"
        "                  not write through const __restrict__), wait-short, wait-nobarrier,\n"
        "                  stage-overwrite, wait-none (the Nth cp.async pipeline: its main loop's\n"
        "                  wait_group leaves one group more in flight, the barrier after it is gone,\n"
        "                  the next step's copies go above that barrier, no wait at all), tma-nowait,\n"
        "                  wgmma-early-release, wgmma-swizzle, proxy-nofence, tma-misalign,\n"
        "                  wgmma-late-wait (the Nth Hopper kernel, in C: its consumers skip the mbarrier\n"
        "                  wait, release a stage before its wgmma retire, or read B through a descriptor\n"
        "                  with the wrong swizzle; its producers store an operand without\n"
        "                  fence.proxy.async; its tensor copies start off the 16-byte grid; its main\n"
        "                  loop's last wait_group 0 moves to the step's end)\n",
        o);
  return o == stdout ? 0 : 1;
}

int main(int argc, char **argv) {
  const char *in = "-", *out = NULL;
  int backend = -1;
  cg_options opt = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-cuda")) backend = CG_CUDA;
    else if (!strcmp(a, "-hip")) backend = CG_HIP;
    else if (!strcmp(a, "-c")) backend = CG_C;
    else if (!strcmp(a, "-main")) opt.main_program = true;
    else if (!strcmp(a, "-check")) opt.check = true;
    else if (!strcmp(a, "-wavefront64")) opt.wavefront64 = true;
    else if (!strncmp(a, "-plant=", 7)) opt.plant = a + 7;
    else if (!strcmp(a, "-embed-weights")) opt.embed_weights = true;
    else if (!strcmp(a, "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
    else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "qcodegen: unknown option '%s'\n", a);
      return usage(stderr);
    } else in = a;
  }
  if (backend < 0) {
    fputs("qcodegen: choose a backend: -cuda, -hip or -c\n", stderr);
    return usage(stderr);
  }
  if ((opt.check || opt.wavefront64) && backend != CG_C) {
    fprintf(stderr, "qcodegen: %s runs the kernels on the CPU: use it with -c\n", opt.check ? "-check" : "-wavefront64");
    return usage(stderr);
  }
  qir_diag d;
  qir_diag_init(&d, stderr, strcmp(in, "-") ? in : "<stdin>", NULL, 0);
  qir_module *m = qir_parse_file(in, &d);
  if (!m) return 1;
  if (qir_verify(m, &d)) {
    qir_module_free(m);
    return 1;
  }
  /* generate into memory first: no half-written file on errors */
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) {
    perror("qcodegen");
    qir_module_free(m);
    return 1;
  }
  int rc = cg_generate(m, &d, (cg_backend)backend, &opt, mem);
  fclose(mem);
  if (!rc && d.n_errors == 0) {
    FILE *o = out ? fopen(out, "w") : stdout;
    if (!o) {
      fprintf(stderr, "qcodegen: cannot write '%s'\n", out);
      rc = 1;
    } else {
      if (fwrite(text, 1, len, o) != len) rc = 1;
      if (out && fclose(o)) rc = 1;
      if (rc) fprintf(stderr, "qcodegen: error writing '%s'\n", out ? out : "<stdout>");
    }
  } else {
    rc = 1;
  }
  free(text);
  qir_module_free(m);
  return rc;
}
