/* qviz: draws a .qir module with Graphviz.
 *
 *   qviz [-graph|-tiles [-top N]|-veu] [-o OUT] [-T svg|png|pdf] [FILE|-]
 *
 * Prints Graphviz DOT by default; -T pipes it through Graphviz's `dot` (found
 * on PATH, or at $QVIZ_DOT) and writes the picture.
 */
#include "qviz.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void usage(FILE *f) {
  fputs("usage: qviz [-graph|-tiles [-top N]|-veu] [-o OUT] [-T svg|png|pdf] [FILE|-]\n"
        "Draws a .qir module (FILE, or stdin) as Graphviz DOT.\n"
        "  -graph     dataflow graph: ops with result types, edges with tensor types,\n"
        "             constants folded into their users, loop/if regions and kernel\n"
        "             groups as clusters, fused edges (#fuse=reg|smem) highlighted (default)\n"
        "  -tiles     one table per compute op: its #tile plan per memory level, grid,\n"
        "             threads, padding, estimated time and share of the total\n"
        "  -top N     with -tiles: tables for the N most expensive ops only\n"
        "  -veu       the rProgram (qopt -rammer) as a grid of waves by vEUs\n"
        "  -o OUT     write to OUT instead of stdout\n"
        "  -T FORMAT  render with Graphviz's dot (svg, png or pdf) instead of printing DOT\n"
        "  --version  print the version\n",
        f);
}

/* Finds an executable `dot`: $QVIZ_DOT if set, else the first on PATH. */
static char *find_dot(void) {
  const char *override = getenv("QVIZ_DOT");
  if (override && *override) return access(override, X_OK) == 0 ? strdup(override) : NULL;
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/bin:/bin";
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    char *cand = malloc(n + 5);
    if (!cand) return NULL;
    memcpy(cand, n ? path : ".", n ? n : 1);
    strcpy(cand + (n ? n : 1), "/dot");
    struct stat st;
    if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) return cand;
    free(cand);
    if (!end) break;
    path = end + 1;
  }
  return NULL;
}

/* Pipes the DOT text through `dot -TFORMAT` into out_fd.  0 on success. */
static int render(const char *dot_text, size_t len, const char *format, int out_fd) {
  char *dot = find_dot();
  if (!dot) {
    fprintf(stderr, "qviz: error: -T %s needs Graphviz's `dot`, which is not installed "
                    "(Debian: apt-get install graphviz; or set QVIZ_DOT); "
                    "without -T qviz prints the DOT text\n", format);
    return 1;
  }
  int pipefd[2];
  if (pipe(pipefd) != 0) {
    fprintf(stderr, "qviz: error: pipe: %s\n", strerror(errno));
    free(dot);
    return 1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[0], 0);
  if (out_fd != 1) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_addclose(&fa, pipefd[1]);
  char targ[32];
  snprintf(targ, sizeof targ, "-T%s", format);
  char *argv[] = {dot, targ, NULL};
  pid_t pid;
  int err = posix_spawn(&pid, dot, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[0]);
  if (err) {
    fprintf(stderr, "qviz: error: cannot run %s: %s\n", dot, strerror(err));
    close(pipefd[1]);
    free(dot);
    return 1;
  }
  size_t done = 0;
  bool write_failed = false;
  while (done < len) {
    ssize_t w = write(pipefd[1], dot_text + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      write_failed = true;   /* dot exited early; its status says why */
      break;
    }
    done += (size_t)w;
  }
  close(pipefd[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  int rc = 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "qviz: error: %s -T%s failed (%s %d)\n", dot, format,
            WIFEXITED(status) ? "exit status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    rc = 1;
  } else if (write_failed) {
    fprintf(stderr, "qviz: error: %s stopped reading its input\n", dot);
    rc = 1;
  }
  free(dot);
  return rc;
}

int main(int argc, char **argv) {
  enum { VIEW_GRAPH, VIEW_TILES, VIEW_VEU } view = VIEW_GRAPH;
  const char *out_path = NULL, *format = NULL, *in_path = NULL;
  int top = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-graph") || !strcmp(a, "--graph")) view = VIEW_GRAPH;
    else if (!strcmp(a, "-tiles") || !strcmp(a, "--tiles")) view = VIEW_TILES;
    else if (!strcmp(a, "-veu") || !strcmp(a, "--veu")) view = VIEW_VEU;
    else if (!strcmp(a, "-h") || !strcmp(a, "-help") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--version") || !strcmp(a, "-version")) {
      printf("qviz %s\n", QIR_VERSION);
      return 0;
    } else if (!strcmp(a, "-top")) {
      char *end = NULL;
      long n = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
      if (i + 1 >= argc || *end || n <= 0 || n > 1000000) {
        fprintf(stderr, "qviz: error: -top needs a positive number\n");
        return 1;
      }
      top = (int)n;
      i++;
    } else if (!strcmp(a, "-o") || !strcmp(a, "-T")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "qviz: error: %s needs an argument\n", a);
        return 1;
      }
      if (a[1] == 'o') out_path = argv[++i];
      else format = argv[++i];
    } else if (!strncmp(a, "-T", 2) && a[2]) {
      format = a + 2;
    } else if (!strncmp(a, "-o", 2) && a[2]) {
      out_path = a + 2;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "qviz: error: unknown option '%s'\n", a);
      usage(stderr);
      return 1;
    } else if (in_path) {
      fprintf(stderr, "qviz: error: more than one input file ('%s', '%s')\n", in_path, a);
      return 1;
    } else {
      in_path = a;
    }
  }
  if (format && strcmp(format, "svg") && strcmp(format, "png") && strcmp(format, "pdf")) {
    fprintf(stderr, "qviz: error: unknown -T format '%s' (svg, png or pdf)\n", format);
    return 1;
  }
  if (!in_path) in_path = "-";

  qir_diag diag;
  qir_diag_init(&diag, stderr, strcmp(in_path, "-") ? in_path : "<stdin>", NULL, 0);
  qir_module *m = qir_parse_file(in_path, &diag);
  if (!m || diag.n_errors) {
    if (m) qir_module_free(m);
    return 1;
  }

  /* Draw into memory first so an error leaves no half-written output. */
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) {
    fprintf(stderr, "qviz: error: out of memory\n");
    qir_module_free(m);
    return 1;
  }
  int rc = view == VIEW_TILES ? qviz_tiles(mem, m, &diag, top)
         : view == VIEW_VEU   ? qviz_veu(mem, m, &diag)
                              : qviz_graph(mem, m, &diag);
  fclose(mem);
  qir_module_free(m);
  if (rc != 0) {
    free(text);
    return 1;
  }

  signal(SIGPIPE, SIG_IGN);   /* a `dot` that dies early must not kill us silently */
  FILE *out = stdout;
  if (out_path && strcmp(out_path, "-")) {
    out = fopen(out_path, "wb");
    if (!out) {
      fprintf(stderr, "qviz: error: cannot write '%s': %s\n", out_path, strerror(errno));
      free(text);
      return 1;
    }
  }
  if (format) {
    fflush(out);
    rc = render(text, len, format, fileno(out));
  } else if (fwrite(text, 1, len, out) != len) {
    fprintf(stderr, "qviz: error: write failed: %s\n", strerror(errno));
    rc = 1;
  }
  if (out != stdout) {
    if (fclose(out) != 0) rc = 1;
    if (rc) remove(out_path);
  } else if (fflush(stdout) != 0) {
    fprintf(stderr, "qviz: error: write failed: %s\n", strerror(errno));
    rc = 1;
  }
  free(text);
  return rc;
}
