/* check_api.c: the host API's qir_check_input on the generated file (included
 * as CHECK_SRC): a right input, then a wrong shape, rank, element type, index. */
#include CHECK_SRC

int main(void) {
  int64_t good[2] = {1, 4}, wide[2] = {2, 4}, flat[1] = {4};
  int rc = 0;
  rc |= qir_check_input(0, "f32", 2, good) != 0;
  rc |= qir_check_input(0, "f32", 2, wide) != 1;
  rc |= qir_check_input(1, "f32", 1, flat) != 1;
  rc |= qir_check_input(2, "f64", 2, good) != 1;
  rc |= qir_check_input(3, "f32", 2, good) != 1;
  fprintf(stderr, "api checks %s\n", rc ? "FAILED" : "OK");
  return rc;
}
