// bf16 GEMMs through oneDNN's matmul primitive, single-threaded per block (gemm_blocks.h).
// Creating a primitive costs far more than running a small one, so each thread keeps the
// primitives it made, keyed by everything that shapes them; a training step reuses a handful of
// shapes. Where oneDNN has no bf16 matmul for the CPU (before AVX-512), the operands are widened
// to f32 and multiplied by OpenBLAS: the same f32 accumulation, at f32's speed.
#include <omp.h>

#include <algorithm>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/blas.h"
#include "meshtrain/core/ops/cpu/gemm_blocks.h"

namespace meshtrain::ops::cpu {

namespace {
using dt = dnnl::memory::data_type;

struct GemmKey {
  bool trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  DType c_dtype;
  bool bias;

  auto tie() const {
    return std::tie(trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, c_dtype, bias);
  }
  bool operator<(const GemmKey& other) const { return tie() < other.tie(); }
};

struct Gemm {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, bias, scratchpad;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A row-major [rows, cols] operand with row stride ld, read transposed when `trans` (then it is
// stored as [cols, rows]).
dnnl::memory::desc operand(int64_t rows, int64_t cols, int64_t ld, bool trans, dt type) {
  return trans ? dnnl::memory::desc({rows, cols}, type, {1, ld})
               : dnnl::memory::desc({rows, cols}, type, {ld, 1});
}

Gemm make_gemm(const GemmKey& key) {
  Gemm g;
  g.a = operand(key.m, key.k, key.lda, key.trans_a, dt::bf16);
  g.b = operand(key.k, key.n, key.ldb, key.trans_b, dt::bf16);
  g.c = operand(key.m, key.n, key.ldc, false, key.c_dtype == DType::bf16 ? dt::bf16 : dt::f32);
  if (key.bias) g.bias = dnnl::memory::desc({1, key.n}, dt::bf16, {key.n, 1});
  dnnl::primitive_attr attr;
  // Its working memory comes from the caller (see bf16_gemm): oneDNN's own is a fresh allocation
  // per call, which the host allocator maps and faults in every time at these sizes.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  if (key.beta != 0.0f) {
    dnnl::post_ops post;
    post.append_sum(key.beta);
    attr.set_post_ops(post);
  }
  try {
    const dnnl::matmul::desc desc = key.bias ? dnnl::matmul::desc(g.a, g.b, g.bias, g.c)
                                             : dnnl::matmul::desc(g.a, g.b, g.c);
    const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    g.primitive = dnnl::matmul(pd);
    g.scratchpad = pd.scratchpad_desc();
  } catch (const dnnl::error& e) {
    throw NotSupported(detail::concat("bf16 GEMM ", key.m, "x", key.n, "x", key.k,
                                      ": oneDNN has no implementation for this CPU (", e.what(),
                                      ")"));
  }
  return g;
}

// Whether oneDNN runs bf16 matmuls on this CPU (AVX-512 and later), probed once in every form a
// call takes (output dtype, bias, scale, accumulation into c, transposes): a CPU that runs some
// of them only takes the widened path for all, rather than failing mid-run on one it lacks.
bool onednn_runs_bf16() {
  static const bool runs = [] {
    try {
      for (const DType c_dtype : {DType::f32, DType::bf16})
        for (const bool bias : {false, true})
          for (const float alpha : {1.0f, 0.5f})
            for (const float beta : {0.0f, 1.0f})
              for (const bool trans : {false, true})  // 2 x 2 operands: strides that differ
                make_gemm(GemmKey{trans, trans, 2, 2, 2, 2, 2, 2, alpha, beta, c_dtype, bias});
      return true;
    } catch (const NotSupported&) {
      return false;
    }
  }();
  return runs;
}

// A row-major [rows, cols] bf16 operand with row stride ld, widened into `out` (dense, row
// stride cols).
void widen(const BF16* in, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = to_f32(in[r * ld + c]);
}

const Gemm& cached_gemm(const GemmKey& key) {
  thread_local std::map<GemmKey, Gemm> cache;
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_gemm(key)).first;
  return it->second;
}
}  // namespace

void bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const BF16* a, int64_t lda, const BF16* b, int64_t ldb, float beta, void* c,
               DType c_dtype, int64_t ldc, const BF16* bias) {
  MT_ASSERT(c_dtype == DType::bf16 || c_dtype == DType::f32, "bf16_gemm writes bf16 or f32, got ",
            dtype_name(c_dtype));
  if (m == 0 || n == 0) return;
  if (!onednn_runs_bf16())
    return widened_bf16_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, c_dtype,
                             ldc, bias);
  const size_t c_size = dtype_size(c_dtype);
  for_gemm_blocks(m, n, k, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    // oneDNN (its OpenMP build) runs inline on a thread whose OpenMP count is 1; for_gemm_blocks
    // spreads the blocks instead.
    thread_local const bool single_threaded = (omp_set_num_threads(1), true);
    (void)single_threaded;
    const GemmKey key{trans_a, trans_b, i1 - i0, j1 - j0, k,       lda,
                      ldb,     ldc,     alpha,   beta,    c_dtype, bias != nullptr};
    const Gemm& g = cached_gemm(key);
    const dnnl::engine& engine = cpu_engine();
    // oneDNN takes non-const handles; it only reads the sources.
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC,
         dnnl::memory(g.a, engine, const_cast<BF16*>(trans_a ? a + i0 : a + i0 * lda))},
        {DNNL_ARG_WEIGHTS,
         dnnl::memory(g.b, engine, const_cast<BF16*>(trans_b ? b + j0 * ldb : b + j0))},
        {DNNL_ARG_DST,
         dnnl::memory(g.c, engine, static_cast<char*>(c) + (i0 * ldc + j0) * c_size)}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(g.bias, engine, const_cast<BF16*>(bias + j0)));
    thread_local std::vector<char> scratchpad;  // grown, never shrunk: reused call after call
    if (scratchpad.size() < g.scratchpad.get_size()) scratchpad.resize(g.scratchpad.get_size());
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(g.scratchpad, engine, scratchpad.data()));
    thread_local dnnl::stream stream(engine);
    g.primitive.execute(stream, args);
    stream.wait();
  });
}

void widened_bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const BF16* a, int64_t lda, const BF16* b, int64_t ldb, float beta, void* c,
                       DType c_dtype, int64_t ldc, const BF16* bias) {
  if (m == 0 || n == 0) return;
  // c in blocks of rows, so that the f32 copies of a's rows and of c stay a block's size however
  // large the product (a head's logits are tokens x vocabulary); b, a weight, is widened whole,
  // once. Kept per thread and grown, never shrunk: a step's GEMMs reuse them without faulting
  // fresh pages in.
  constexpr int64_t kRows = 256;
  thread_local std::vector<float> a32, b32, c32;
  widen(b, trans_b ? n : k, trans_b ? k : n, ldb, b32);
  for (int64_t i0 = 0; i0 < m; i0 += kRows) {
    const int64_t rows = std::min(kRows, m - i0);
    // a's rows [i0, i0 + rows): a [rows, k] block, or, stored transposed, columns of [k, m].
    widen(trans_a ? a + i0 : a + i0 * lda, trans_a ? k : rows, trans_a ? rows : k, lda, a32);
    c32.resize(static_cast<size_t>(rows * n));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = (i0 + i) * ldc + j;
        float& out = c32[i * n + j];
        out = bias ? to_f32(bias[j]) : 0.0f;
        if (beta != 0.0f)
          out += beta * (c_dtype == DType::f32 ? static_cast<const float*>(c)[at]
                                               : to_f32(static_cast<const BF16*>(c)[at]));
      }
    sgemm(trans_a, trans_b, rows, n, k, alpha, a32.data(), trans_a ? rows : k, b32.data(),
          trans_b ? k : n, 1.0f, c32.data(), n);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = (i0 + i) * ldc + j;
        if (c_dtype == DType::f32)
          static_cast<float*>(c)[at] = c32[i * n + j];
        else
          static_cast<BF16*>(c)[at] = to_bf16(c32[i * n + j]);
      }
  }
}

}  // namespace meshtrain::ops::cpu
