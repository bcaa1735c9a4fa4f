/* The worked example from the top of dtorch.h, as a program: a linear layer,
 * relu and softmax on one device, with errors checked. Uses only the public
 * API and the shared library. */
#include <dtorch/dtorch.h>
#include <math.h>
#include <stdio.h>

int main(void) {
  dt_manual_seed(0);
  dt_tensor *x = dt_randn(DT_SHAPE(4, 8), NULL);   /* float32 [4, 8] */
  dt_tensor *w = dt_randn(DT_SHAPE(16, 8), NULL);  /* [out, in] */
  dt_tensor *z = dt_linear(x, w, NULL);            /* [4, 16] */
  dt_tensor *h = dt_relu(z);
  dt_tensor *p = dt_softmax(h, 1);
  float host[64];
  int rc = 0;
  if (dt_to_host(p, host, sizeof host) != DT_OK) {
    fprintf(stderr, "%s\n", dt_last_error());
    rc = 1;
  } else {
    for (int r = 0; r < 4 && !rc; r++) { /* each row of a softmax sums to 1 */
      double s = 0;
      for (int c = 0; c < 16; c++) s += host[r * 16 + c];
      printf("row %d sums to %.6f\n", r, s);
      if (fabs(s - 1) > 1e-5) rc = 1;
    }
  }
  dt_tensor_release(p);
  dt_tensor_release(h);
  dt_tensor_release(z);
  dt_tensor_release(w);
  dt_tensor_release(x);
  return rc;
}
