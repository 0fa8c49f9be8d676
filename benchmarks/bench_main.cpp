// Fluxion's benchmark harness: for each workload, Fluxion's median time and
// the ratio to references measured in the same run (a direct C++/BLAS
// implementation, and NumPy through benchmarks/numpy_ref.py when
// /usr/bin/python3 has NumPy). Run: `make bench` or build/fluxion_bench.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "fluxion/fluxion.h"
#include "fluxion/ops/fast.h"
#include "fluxion/ops/quantized.h"

using namespace fluxion;

namespace {

double median_seconds(const std::function<void()>& f, int repeat = 15,
                      int warmup = 3) {
  for (int i = 0; i < warmup; ++i) {
    f();
  }
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::map<std::string, double> numpy_reference() {
  std::map<std::string, double> out;
  std::string cmd = "/usr/bin/python3 " FLUXION_SOURCE_DIR
                    "/benchmarks/numpy_ref.py "
                    "2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    return out;
  }
  char name[128];
  double v;
  while (fscanf(p, "%127s %lf", name, &v) == 2) {
    out[name] = v;
  }
  pclose(p);
  return out;
}

void row(const char* name, const char* unit, double value, double fluxion_s,
         const char* ref_name, double ref_s) {
  std::printf("%-26s %10.3f %-7s %-22s", name, value, unit, ref_name);
  if (ref_s > 0) {
    std::printf(" ratio(time fluxion/ref) = %.2f\n", fluxion_s / ref_s);
  } else {
    std::printf(" (reference unavailable)\n");
  }
}

// A dense layer stack: params = {w0, b0, w1, b1, ...}.
array mlp(const std::vector<array>& params, const array& x) {
  array h = x;
  for (size_t i = 0; i < params.size(); i += 2) {
    h = matmul(h, params[i]) + params[i + 1];
    if (i + 2 < params.size()) {
      h = maximum(h, array(0.0f));
    }
  }
  return h;
}

std::vector<array> init_mlp(const std::vector<int>& sizes) {
  std::vector<array> params;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    params.push_back(random::normal({sizes[i], sizes[i + 1]}) *
                     (1.0f / std::sqrt(static_cast<float>(sizes[i]))));
    params.push_back(zeros({sizes[i + 1]}));
  }
  eval(params);
  return params;
}

// Cross-entropy of logits against integer labels (one-hot by comparison).
array xent(const array& logits, const array& onehot) {
  return mean(logsumexp(logits, -1) - sum(logits * onehot, -1));
}

array onehot_labels(int batch, int classes) {
  auto labels = random::randint(array(0), array(classes), {batch});
  return astype(equal(expand_dims(labels, 1), arange(classes)), float32);
}

void transform_benchmarks() {
  std::printf("\nTransformations\n");
  // value_and_grad training step of a 784-512-512-10 MLP, batch 256.
  {
    auto params = init_mlp({784, 512, 512, 10});
    auto x = random::normal({256, 784});
    auto y = onehot_labels(256, 10);
    eval(x, y);
    auto loss_fn = [&](const std::vector<array>& p) {
      return std::vector<array>{xent(mlp(p, x), y)};
    };
    std::vector<int> argnums(params.size());
    std::iota(argnums.begin(), argnums.end(), 0);
    auto step = value_and_grad(loss_fn, argnums);
    double t = median_seconds(
        [&] {
          auto loss_grads_ = step(params);
          [[maybe_unused]] auto& loss = std::get<0>(loss_grads_);
          [[maybe_unused]] auto& grads = std::get<1>(loss_grads_);
          std::vector<array> updated;
          for (size_t i = 0; i < params.size(); ++i) {
            updated.push_back(params[i] - 0.01f * grads[i]);
          }
          eval(updated);
          eval(loss);
        },
        10, 2);
    double flops = 3.0 * 2 * 256 * (784.0 * 512 + 512.0 * 512 + 512.0 * 10);
    std::printf("%-26s %10.3f %-7s (%.1f GFLOP/s)\n", "mlp_train_step_b256",
                t * 1e3, "ms", flops / t / 1e9);
  }
  // Per-example gradients of a 784-128-10 MLP, batch 128: vmap(grad) vs a
  // loop of grad calls.
  {
    auto params = init_mlp({784, 128, 10});
    auto x = random::normal({128, 784});
    auto y = onehot_labels(128, 10);
    eval(x, y);
    auto example_loss = [](const std::vector<array>& in) {
      // in = {w0, b0, w1, b1, x (784), y (10)}
      std::vector<array> p(in.begin(), in.begin() + 4);
      auto logits = mlp(p, reshape(in[4], {1, 784}));
      return std::vector<array>{xent(logits, reshape(in[5], {1, 10}))};
    };
    auto grad_fn = [&](const std::vector<array>& in) {
      return vjp(example_loss, in, {array(1.0f)}, {0, 1, 2, 3}).second;
    };
    auto per_example = vmap(grad_fn, {-1, -1, -1, -1, 0, 0});
    std::vector<array> in = params;
    in.push_back(x);
    in.push_back(y);
    double t_vmap = median_seconds([&] { eval(per_example(in)); }, 10, 2);
    double t_loop = median_seconds(
        [&] {
          std::vector<array> all;
          for (int i = 0; i < 128; ++i) {
            std::vector<array> one = params;
            one.push_back(take(x, i, 0));
            one.push_back(take(y, i, 0));
            auto g = grad_fn(one);
            all.insert(all.end(), g.begin(), g.end());
          }
          eval(all);
        },
        5, 1);
    std::printf(
        "%-26s %10.3f %-7s loop of grad %.3f ms  vmap speed-up = "
        "%.1fx\n",
        "per_example_grads_b128", t_vmap * 1e3, "ms", t_loop * 1e3,
        t_loop / t_vmap);
  }
  // Hessian of a 512-variable function.
  {
    auto a = random::normal({512, 512}) * (1.0f / 512);
    a.eval();
    auto f = [&](const array& v) {
      return sum(square(matmul(a, v))) + sum(v * v * v);
    };
    auto v = random::normal({512});
    v.eval();
    double t = median_seconds([&] { hessian(f)(v).eval(); }, 5, 1);
    std::printf("%-26s %10.3f %-7s\n", "hessian_512", t * 1e3, "ms");
  }
}

}  // namespace

// Fused mx.fast primitives against the same operations composed from
// public ops, in the same run.
void fast_benchmarks() {
  auto compare = [](const char* name, const std::function<array()>& fused,
                    const std::function<array()>& composed, double flop) {
    double t = median_seconds([&] { fused().eval(); }, 9, 2);
    double t_ref = median_seconds([&] { composed().eval(); }, 9, 2);
    if (flop > 0) {
      row(name, "GFLOP/s", flop / t / 1e9, t, "composed ops", t_ref);
    } else {
      row(name, "ms", t * 1e3, t, "composed ops", t_ref);
    }
  };
  {
    const int B = 1, H = 16, L = 1024, D = 64;
    array q = random::normal({B, H, L, D});
    array k = random::normal({B, H, L, D});
    array v = random::normal({B, H, L, D});
    eval(q, k, v);
    const float sc = 0.125f;
    const double flop = 4.0 * B * H * L * L * D;
    compare(
        "sdpa_b1_h16_l1024_d64",
        [&] { return fast::scaled_dot_product_attention(q, k, v, sc); },
        [&] {
          return fast::scaled_dot_product_attention_composed(q, k, v, sc);
        },
        flop);
    compare(
        "sdpa_causal_l1024",
        [&] {
          return fast::scaled_dot_product_attention(q, k, v, sc, "causal");
        },
        [&] {
          return fast::scaled_dot_product_attention_composed(q, k, v, sc,
                                                             "causal");
        },
        flop / 2);
  }
  {
    const int H = 16, Lk = 4096, D = 64;
    array q = random::normal({1, H, 1, D});
    array k = random::normal({1, H, Lk, D});
    array v = random::normal({1, H, Lk, D});
    eval(q, k, v);
    compare(
        "sdpa_decode_lk4096",
        [&] { return fast::scaled_dot_product_attention(q, k, v, 0.125f); },
        [&] {
          return fast::scaled_dot_product_attention_composed(q, k, v, 0.125f);
        },
        0);
  }
  {
    const int m = 4096;
    array x = random::normal({m, m});
    array w = random::normal({m});
    array b = random::normal({m});
    eval(x, w, b);
    compare(
        "layer_norm_4096x4096",
        [&] { return fast::layer_norm(x, w, b, 1e-5f); },
        [&] { return fast::layer_norm_composed(x, w, b, 1e-5f); }, 0);
    compare(
        "rms_norm_4096x4096", [&] { return fast::rms_norm(x, w, 1e-5f); },
        [&] { return fast::rms_norm_composed(x, w, 1e-5f); }, 0);
  }
}

int main(int argc, char** argv) {
  // `--chain`: only the graph-building chains (section 1).
  bool chain_only = argc > 1 && std::string(argv[1]) == "--chain";
  std::printf("Fluxion benchmarks (median of repeated runs)\n");
  auto np = numpy_reference();
  auto np_get = [&](const char* k) { return np.count(k) ? np[k] : -1.0; };

  // 1. Graph build + eval of a chain of 1000 adds on 16 elements.
  {
    array small = ones({16});
    small.eval();
    const int n_ops = 1000;
    double t = median_seconds(
        [&] {
          array x = small;
          for (int i = 0; i < n_ops; ++i) {
            x = x + small;
          }
          x.eval();
        },
        50, 5);
    // Reference: an eager C++ loop allocating a result per op.
    double t_ref = median_seconds(
        [&] {
          auto x = std::make_unique<float[]>(16);
          std::fill(x.get(), x.get() + 16, 1.0f);
          for (int i = 0; i < n_ops; ++i) {
            auto y = std::make_unique<float[]>(16);
            for (int j = 0; j < 16; ++j) {
              y[j] = x[j] + 1.0f;
            }
            x = std::move(y);
          }
          volatile float sink = x[0];
          (void)sink;
        },
        50, 5);
    row("chain_1000_adds", "us/op", t / n_ops * 1e6, t / n_ops, "numpy (us/op)",
        np_get("chain_1000_adds"));
    std::printf("%-26s %10.3f %-7s %-22s ratio = %.2f\n", "",
                t_ref / n_ops * 1e6, "us/op", "eager C++ loop", t / t_ref);
    // The same chain with a scalar operand (`x + 1.0f`: a weak scalar, one
    // constant per op) and with `x * small` (issue 18: <= 0.5 us/op).
    double t_scalar = median_seconds(
        [&] {
          array x = small;
          for (int i = 0; i < n_ops; ++i) {
            x = x + 1.0f;
          }
          x.eval();
        },
        50, 5);
    row("chain_1000_add_scalar", "us/op", t_scalar / n_ops * 1e6,
        t_scalar / n_ops, "numpy y+1.0 (us/op)",
        np_get("chain_1000_add_scalar"));
    double t_mul = median_seconds(
        [&] {
          array x = small;
          for (int i = 0; i < n_ops; ++i) {
            x = x * small;
          }
          x.eval();
        },
        50, 5);
    row("chain_1000_mul_array", "us/op", t_mul / n_ops * 1e6, t_mul / n_ops,
        "numpy y*x (us/op)", np_get("chain_1000_mul_array"));
  }
  if (chain_only) {
    return 0;
  }

  const int n = 1 << 24;
  // 2. Add of two 16M float32 arrays.
  {
    array a = random::uniform({n});
    array b = random::uniform({n});
    eval(a, b);
    double t = median_seconds([&] { (a + b).eval(); });
    std::vector<float> x(n, 1.0f), y(n, 2.0f), z(n);
    double t_ref = median_seconds([&] {
      for (int i = 0; i < n; ++i) {
        z[i] = x[i] + y[i];
      }
    });
    double gb = 3.0 * n * 4 / 1e9;
    row("add_16M_f32", "GB/s", gb / t, t, "numpy", np_get("add_16M_f32"));
    std::printf("%-26s %10.3f %-7s %-22s ratio = %.2f\n", "", gb / t_ref,
                "GB/s", "C++ loop (1 thread)", t / t_ref);
  }

  // 3. Sum of 16M float32.
  {
    array a = random::uniform({n});
    a.eval();
    double t = median_seconds([&] { sum(a).eval(); });
    std::vector<float> x(n, 1.0f);
    double t_ref = median_seconds([&] {
      double s = 0;
      for (int i = 0; i < n; ++i) {
        s += x[i];
      }
      volatile double sink = s;
      (void)sink;
    });
    double gb = 1.0 * n * 4 / 1e9;
    row("sum_16M_f32", "GB/s", gb / t, t, "numpy", np_get("sum_16M_f32"));
    std::printf("%-26s %10.3f %-7s %-22s ratio = %.2f\n", "", gb / t_ref,
                "GB/s", "C++ loop (1 thread)", t / t_ref);
  }

  // 4. 1024^3 float32 matmul.
  {
    const int m = 1024;
    array a = random::uniform({m, m});
    array b = random::uniform({m, m});
    eval(a, b);
    double t = median_seconds([&] { matmul(a, b).eval(); }, 7, 2);
    std::vector<float> x(m * m, 1.0f), y(m * m, 1.0f), z(m * m);
    double t_ref = median_seconds(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f,
                      x.data(), m, y.data(), m, 0.0f, z.data(), m);
        },
        7, 2);
    double gflop = 2.0 * m * m * m / 1e9;
    row("matmul_1024_f32", "GFLOP/s", gflop / t, t, "OpenBLAS sgemm", t_ref);
    std::printf(
        "%-26s %10.3f %-7s %-22s ratio = %.2f\n", "",
        np_get("matmul_1024_f32") > 0 ? gflop / np_get("matmul_1024_f32") : 0.0,
        "GFLOP/s", "numpy", t / np_get("matmul_1024_f32"));
  }

  // 4a. 4-bit quantized matmul (group 64) against the dense float32
  // matmul of the same shapes: x (M x 4096) @ W^T, W 4096 x 4096.
  {
    const int k = 4096;
    array w = random::normal({k, k});
    auto wq_scales_biases_ = quantize(w, 64, 4);
    [[maybe_unused]] auto& wq = std::get<0>(wq_scales_biases_);
    [[maybe_unused]] auto& scales = std::get<1>(wq_scales_biases_);
    [[maybe_unused]] auto& biases = std::get<2>(wq_scales_biases_);
    array wt = transpose(w);
    eval(w, wq, scales, biases);
    for (int m : {1, 32}) {
      array x = random::normal({m, k});
      x.eval();
      double t = median_seconds(
          [&] { quantized_matmul(x, wq, scales, biases).eval(); }, 9, 2);
      double t_ref = median_seconds([&] { matmul(x, wt).eval(); }, 9, 2);
      std::string name = "qmm_4bit_" + std::to_string(m) + "x4096x4096";
      double gflop = 2.0 * m * k * k / 1e9;
      row(name.c_str(), "GFLOP/s", gflop / t, t, "dense f32 matmul", t_ref);
    }
  }

  // 4b. Sort of 1M float32 (one row) and cumsum of 16M float32.
  {
    const int m = 1 << 20;
    array a = random::uniform({m});
    a.eval();
    double t = median_seconds([&] { sort(a).eval(); }, 9, 2);
    const float* src = a.data<float>();
    std::vector<float> x(m);
    double t_ref = median_seconds(
        [&] {
          std::copy(src, src + m, x.begin());
          std::sort(x.begin(), x.end());
        },
        9, 2);
    row("sort_1M_f32", "ms", t * 1e3, t, "std::sort on a copy", t_ref);
  }
  {
    array a = random::uniform({n});
    a.eval();
    double t = median_seconds([&] { cumsum(a).eval(); });
    const float* src = a.data<float>();
    std::vector<float> y(n);
    double t_ref = median_seconds([&] {
      float acc = 0;
      for (int i = 0; i < n; ++i) {
        acc += src[i];
        y[i] = acc;
      }
    });
    double gb = 2.0 * n * 4 / 1e9;
    row("cumsum_16M_f32", "GB/s", gb / t, t, "C++ prefix-sum loop", t_ref);
  }

  // 4c. conv2d: N=8, 56x56, 64 -> 64 channels, 3x3, stride 1, pad 1,
  // float32, against im2col + one cblas_sgemm written here.
  {
    const int N = 8, H = 56, W = 56, C = 64, O = 64, K = 3;
    array x = random::normal({N, H, W, C});
    array w = random::normal({O, K, K, C});
    eval(x, w);
    double t = median_seconds([&] { conv2d(x, w, 1, 1).eval(); }, 9, 2);
    const float* px = x.data<float>();
    const float* pw = w.data<float>();
    const int cols = K * K * C;
    const int64_t rows = int64_t{N} * H * W;
    std::vector<float> col(rows * cols), out(rows * O);
    double t_ref = median_seconds(
        [&] {
          for (int64_t r = 0; r < rows; ++r) {
            int n = static_cast<int>(r / (H * W));
            int oh = static_cast<int>(r / W % H), ow = static_cast<int>(r % W);
            float* dst = col.data() + r * cols;
            for (int kh = 0; kh < K; ++kh) {
              for (int kw = 0; kw < K; ++kw, dst += C) {
                int ih = oh - 1 + kh, iw = ow - 1 + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
                  std::fill(dst, dst + C, 0.0f);
                } else {
                  std::copy_n(px + ((int64_t{n} * H + ih) * W + iw) * C, C,
                              dst);
                }
              }
            }
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
                      static_cast<int>(rows), O, cols, 1.0f, col.data(), cols,
                      pw, cols, 0.0f, out.data(), O);
        },
        9, 2);
    double gflop = 2.0 * rows * O * cols / 1e9;
    row("conv2d_8x56x56x64_3x3", "GFLOP/s", gflop / t, t,
        "im2col + OpenBLAS sgemm", t_ref);
    std::printf("%-26s %10.3f %-7s (fluxion %.2f ms, reference %.2f ms)\n", "",
                gflop / t_ref, "GFLOP/s", t * 1e3, t_ref * 1e3);
  }

  // 5. Peak memory of a 100-op elementwise chain over a 16M array.
  {
    array a = random::uniform({n});
    a.eval();
    clear_cache();
    reset_peak_memory();
    size_t before = get_active_memory();
    array x = a;
    for (int i = 0; i < 100; ++i) {
      x = exp(x * 0.5f) - 1.0f;
    }
    x.eval();
    double peak_buffers =
        static_cast<double>(get_peak_memory() - before) / (n * 4.0);
    std::printf("%-26s %10.2f %-7s (target: at most 3 incl. the input)\n",
                "chain_100_ops_16M_peak", peak_buffers + 1.0, "buffers");
  }
  fast_benchmarks();
  transform_benchmarks();
  return 0;
}
