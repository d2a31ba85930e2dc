/* diag.c: located messages in the form compilers use:
 *   FILE:LINE:COL: error: MESSAGE
 *     the source line
 *         ^
 * The library never exits; tools look at n_errors. */
#include "qir.h"

#include <string.h>

void qir_diag_init(qir_diag *d, FILE *out, const char *file, const char *source, size_t len) {
  memset(d, 0, sizeof *d);
  d->out = out ? out : stderr;
  d->file = file;
  d->source = source;
  d->source_len = len;
}

void qir_diag_init_quiet(qir_diag *d) {
  qir_diag_init(d, NULL, NULL, NULL, 0);
  d->quiet = true;
}

static const char *severity_name(qir_severity sev) {
  switch (sev) {
  case QIR_SEV_ERROR: return "error";
  case QIR_SEV_WARNING: return "warning";
  default: return "note";
  }
}

/* Prints source line `line` (1-based) and a caret under `col`, when the source
 * is known.  Bytes that are not printable ASCII are shown as '?' so a binary
 * file cannot garble the terminal. */
static void print_caret(qir_diag *d, int line, int col) {
  if (!d->source || line <= 0) return;
  const char *p = d->source, *end = d->source + d->source_len;
  for (int l = 1; l < line && p < end; p++)
    if (*p == '\n') l++;
  if (p >= end && line > 1) return;
  const char *eol = p;
  while (eol < end && *eol != '\n') eol++;
  if (eol - p > 300) eol = p + 300;
  fputs("  ", d->out);
  for (const char *q = p; q < eol; q++) {
    unsigned char c = (unsigned char)*q;
    fputc(c == '\t' ? '\t' : (c >= 32 && c < 127) ? c : '?', d->out);
  }
  fputs("\n  ", d->out);
  for (int i = 1; i < col && p + i - 1 < eol; i++) fputc(p[i - 1] == '\t' ? '\t' : ' ', d->out);
  fputs("^\n", d->out);
}

void qir_diag_vreport(qir_diag *d, qir_severity sev, qir_loc loc, const char *fmt, va_list ap) {
  if (sev == QIR_SEV_ERROR) d->n_errors++;
  else if (sev == QIR_SEV_WARNING) d->n_warnings++;
  if (d->quiet) return;
  int max = d->max_errors ? d->max_errors : 20;
  if (sev == QIR_SEV_ERROR && d->n_errors > max) {
    if (d->n_errors == max + 1) fprintf(d->out, "%s: error: too many errors, stopping\n", d->file ? d->file : "qir");
    return;
  }
  const char *file = loc.file ? loc.file : d->file ? d->file : "<unknown>";
  if (loc.line > 0) fprintf(d->out, "%s:%d:%d: %s: ", file, loc.line, loc.col > 0 ? loc.col : 1, severity_name(sev));
  else fprintf(d->out, "%s: %s: ", file, severity_name(sev));
  vfprintf(d->out, fmt, ap);
  fputc('\n', d->out);
  /* Caret lines only for the file whose text we hold. */
  if (loc.line > 0 && (!loc.file || !d->file || strcmp(loc.file, d->file) == 0)) print_caret(d, loc.line, loc.col);
}

void qir_diag_report(qir_diag *d, qir_severity sev, qir_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  qir_diag_vreport(d, sev, loc, fmt, ap);
  va_end(ap);
}
