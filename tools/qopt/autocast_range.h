/* autocast_range.h: -autocast's calibration run (autocast_range.c). */
#ifndef QOPT_AUTOCAST_RANGE_H
#define QOPT_AUTOCAST_RANGE_H

#include "qir.h"

/* Runs m's body on the comma-separated tensor files (one per input, in
 * `input` order) and writes into magnitude[value id] the largest |x| each
 * value took (values not measured keep what the caller put there; NaN counts
 * as infinite).  *measured_ops: the ops that ran.  False after an error into
 * d (a missing or mistyped file, an op the reference cannot evaluate). */
bool autocast_calibrate(qir_module *m, const char *files, double *magnitude, int n_values, int *measured_ops,
                        qir_diag *d);

#endif /* QOPT_AUTOCAST_RANGE_H */
