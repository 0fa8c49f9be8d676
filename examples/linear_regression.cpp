// Linear regression by hand-written gradient descent, on generated data.
// Run with `make demo`: prints the loss falling towards the noise floor and
// the distance between the learned and the true weights.
#include <cstdio>

#include "fluxion/fluxion.h"

using namespace fluxion;

int main() {
  const int n = 4096, d = 16;
  const float lr = 0.02f;
  random::seed(42);

  // y = X w* + b* + noise
  array w_true = random::normal({d, 1});
  array b_true = array(0.5f);
  array X = random::normal({n, d});
  array y = matmul(X, w_true) + b_true + 0.05f * random::normal({n, 1});

  array w = zeros({d, 1});
  array b = array(0.0f);
  std::printf("Fitting %d samples with %d features\n", n, d);
  for (int step = 0; step <= 200; ++step) {
    array residual = matmul(X, w) + b - y;
    array loss = mean(square(residual));
    // d/dw mean(r^2) = 2/n X^T r, d/db = 2 mean(r).
    array grad_w = matmul(transpose(X), residual) * (2.0f / n);
    array grad_b = 2.0f * mean(residual);
    w = w - lr * grad_w;
    b = b - lr * grad_b;
    eval(w, b, loss);
    if (step % 20 == 0) {
      std::printf("step %3d  loss %.6f\n", step, loss.item<float>());
    }
  }
  float w_err = sqrt(sum(square(w - w_true))).item<float>();
  std::printf("|w - w*| = %.4f, b = %.4f (b* = 0.5)\n", w_err,
              b.item<float>());
  std::printf("noise floor (loss of the true model) = %.6f\n",
              mean(square(matmul(X, w_true) + b_true - y)).item<float>());
  return w_err < 0.05f ? 0 : 1;
}
