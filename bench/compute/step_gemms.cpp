#include "bench/compute/step_gemms.h"

#include <chrono>
#include <vector>

#include "bench/train/mode_run.h"
#include "meshtrain/core/ops/cpu/blas.h"

namespace meshtrain::bench {

namespace {

// A linear in GPT-2's Conv1D layout (weight [in, out]) over `rows` tokens: forward, d_in =
// d_out W^T, d_weight += in^T d_out (meshtrain/core/ops/cpu/linear.cpp). With a bias the forward GEMM adds
// onto the bias-seeded output (beta = 1).
void add_linear(std::vector<StepGemm>& out, const std::string& name, int64_t rows, int64_t in,
                int64_t o, int64_t per_step) {
  out.push_back({name + " fwd", false, false, rows, o, in, in, o, o, 1.0f, per_step, true});
  out.push_back({name + " d_in", false, true, rows, in, o, o, o, in, 0.0f, per_step, false});
  out.push_back({name + " d_weight", true, false, in, o, rows, in, o, o, 1.0f, per_step, false});
}

std::vector<float> filled(int64_t size) {
  // Small non-zero values: GEMM speed does not depend on them, but denormals would slow it down.
  std::vector<float> v(static_cast<size_t>(size));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 0.01f * static_cast<float>(static_cast<int>(i % 97) - 48);
  return v;
}

std::vector<BF16> to_bf16(const std::vector<float>& v) {
  std::vector<BF16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = meshtrain::to_bf16(v[i]);
  return out;
}

}  // namespace

std::vector<StepGemm> step_gemms(const GPT2Config& model, int64_t batch, int64_t seq) {
  const int64_t d = model.dim, rows = batch * seq, v = model.vocab, L = model.layers;
  const int64_t hd = d / model.heads, per_head = L * batch * model.heads, ld_qkv = 3 * d;
  std::vector<StepGemm> g;
  add_linear(g, "c_attn", rows, d, 3 * d, L);
  add_linear(g, "attn c_proj", rows, d, d, L);
  add_linear(g, "mlp c_fc", rows, d, 4 * d, L);
  add_linear(g, "mlp c_proj", rows, 4 * d, d, L);
  // The tied lm head (meshtrain/parallel/nn/lm_head_loss.cpp): logits = x wte^T, d_x = d_logits wte,
  // d_wte += d_logits^T x.
  g.push_back({"lm_head fwd", false, true, rows, v, d, d, d, v, 0.0f, 1, true});
  g.push_back({"lm_head d_in", false, false, rows, d, v, v, d, d, 0.0f, 1, false});
  g.push_back({"lm_head d_weight", true, false, v, d, rows, v, d, d, 1.0f, 1, false});
  // Attention per (sequence, head), q/k/v read in place from qkv [T, 3d]
  // (meshtrain/core/ops/cpu/attention.cpp):
  // S = Q K^T and O = P V forward; dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q backward.
  g.push_back(
      {"attn QK^T fwd", false, true, seq, seq, hd, ld_qkv, ld_qkv, seq, 0.0f, per_head, true});
  g.push_back(
      {"attn PV fwd", false, false, seq, hd, seq, seq, ld_qkv, d, 0.0f, per_head, true});
  // Backward recomputes the scores (it keeps no probabilities from forward).
  g.push_back(
      {"attn QK^T bwd", false, true, seq, seq, hd, ld_qkv, ld_qkv, seq, 0.0f, per_head, false});
  g.push_back({"attn dV", true, false, seq, hd, seq, seq, d, ld_qkv, 0.0f, per_head, false});
  g.push_back({"attn dP", false, true, seq, seq, hd, d, ld_qkv, seq, 0.0f, per_head, false});
  g.push_back({"attn dQ", false, false, seq, hd, seq, seq, ld_qkv, ld_qkv, 0.0f, per_head, false});
  g.push_back({"attn dK", true, false, seq, hd, seq, seq, ld_qkv, ld_qkv, 0.0f, per_head, false});
  return g;
}

double gemm_seconds(const StepGemm& g, DType dtype) {
  using Clock = std::chrono::steady_clock;
  const std::vector<float> a = filled((g.trans_a ? g.k : g.m) * g.lda);
  const std::vector<float> b = filled((g.trans_b ? g.n : g.k) * g.ldb);
  std::vector<float> c = filled(g.m * g.ldc);
  const std::vector<BF16> a16 = to_bf16(a), b16 = to_bf16(b);
  std::vector<BF16> c16 = to_bf16(c);
  const auto call = [&] {
    if (dtype == DType::bf16) {
      ops::cpu::bf16_gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a16.data(), g.lda,
                          b16.data(), g.ldb, g.beta, c16.data(), DType::bf16, g.ldc);
    } else {
      ops::cpu::sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a.data(), g.lda, b.data(), g.ldb,
                      g.beta, c.data(), g.ldc);
    }
  };
  call();
  // Each repeat loops for at least 20 ms so that the small attention GEMMs are timed over many
  // calls; the median of the repeats discards a disturbed one.
  std::vector<double> per_call;
  for (int repeat = 0; repeat < 5; ++repeat) {
    const Clock::time_point start = Clock::now();
    double elapsed = 0.0;
    int calls = 0;
    do {
      call();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < 0.02);
    per_call.push_back(elapsed / calls);
  }
  return median(per_call);
}

}  // namespace meshtrain::bench
