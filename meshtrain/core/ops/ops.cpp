// Validating entry points of the kernel set: each checks its arguments (defined, one device,
// dtypes, shapes) with messages that say what was expected, then dispatches on the device.
#include "meshtrain/core/ops/ops.h"

#include <cmath>
#include <string>
#include <type_traits>

#include "meshtrain/config.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/op_counts.h"
#include "meshtrain/core/trace/recorder.h"
#if MESHTRAIN_HAS_CUDA
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#endif

namespace meshtrain::ops {

namespace {

constexpr int64_t kAny = -1;  // a dimension the check leaves free, printed as "*"

std::string describe(const Tensor& t) { return t.defined() ? t.describe() : "undefined"; }

// "[768, *]", or "[..., 768]" for a tensor whose leading dims flatten into rows.
std::string pattern(const Shape& dims, bool leading = false) {
  std::string text = leading ? "[..., " : "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + (dims[i] == kAny ? std::string("*") : std::to_string(dims[i]));
  return text + "]";
}

// The checks of one call. The first tensor fixes the device; the first compute tensor fixes the
// dtype that every other compute tensor of the call must share.
class Args {
 public:
  explicit Args(const char* op) : op_(op) {}

  Device device() const { return device_; }
  const char* op() const { return op_; }
  // The call's work, as op_counts.h counts it: the bytes of every tensor checked, the FLOPs its
  // entry point states.
  double bytes() const { return bytes_; }
  double flops() const { return flops_; }
  void set_flops(double flops) { flops_ = flops; }
  // For a kernel that touches part of its tensors: the bytes it reads and writes instead.
  void set_bytes(double bytes) { bytes_ = bytes; }

  // An activation, parameter or gradient: f32 or bf16.
  void compute(const char* name, const Tensor& t) {
    tensor(name, t);
    MT_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16, op_, ": ", name,
             " must be f32 or bf16, got ", t.describe());
    if (!dtype_name_) {
      dtype_name_ = name;
      dtype_ = t.dtype();
    }
    MT_CHECK(t.dtype() == dtype_, op_, ": ", name, " must have the dtype of ", dtype_name_, " (",
             dtype_name(dtype_), "), got ", t.describe());
  }
  // compute() for an argument the caller may leave undefined; says whether it is there.
  bool optional_compute(const char* name, const Tensor& t) {
    if (t.defined()) compute(name, t);
    return t.defined();
  }
  void of_dtype(const char* name, const Tensor& t, DType dtype) {
    tensor(name, t);
    MT_CHECK(t.dtype() == dtype, op_, ": ", name, " must be ", dtype_name(dtype), ", got ",
             t.describe());
  }

  // Exact shape; `meaning` names the dims, e.g. "[in, out]".
  void shape(const char* name, const Tensor& t, const char* meaning, const Shape& dims) const {
    bool ok = t.ndim() == static_cast<int>(dims.size());
    for (size_t i = 0; ok && i < dims.size(); ++i) ok = dims[i] == kAny || dims[i] == t.shape()[i];
    MT_CHECK(ok, op_, ": ", name, " must be ", meaning, " = ", pattern(dims), ", got ",
             t.describe());
  }
  // A tensor whose leading dims flatten into rows of `cols`; returns the number of rows.
  int64_t rows(const char* name, const Tensor& t, const char* meaning, int64_t cols) const {
    MT_CHECK(t.ndim() >= 1 && t.dim(-1) == cols, op_, ": ", name, " must be ", meaning, " = ",
             pattern({cols}, true), ", got ", t.describe());
    return cols ? t.numel() / cols : 0;
  }
  // Like rows(), and the number of rows must be `count` (the rows of another argument).
  void rows_like(const char* name, const Tensor& t, const char* meaning, int64_t count,
                 int64_t cols) const {
    MT_CHECK(t.ndim() >= 1 && t.dim(-1) == cols && t.numel() == count * cols, op_, ": ", name,
             " must be ", meaning, " = ", pattern({count, cols}), " after flattening, got ",
             t.describe());
  }
  void numel(const char* name, const Tensor& t, const char* meaning, int64_t count) const {
    MT_CHECK(t.numel() == count, op_, ": ", name, " must hold ", meaning, " = ", count,
             " elements, got ", t.describe());
  }

  // Any tensor: defined, and on the device of the call's first tensor.
  void tensor(const char* name, const Tensor& t) {
    MT_CHECK(t.defined(), op_, ": ", name, " must be a defined tensor");
    if (!device_name_) {
      device_name_ = name;
      device_ = t.device();
    }
    MT_CHECK(t.device() == device_, op_, ": all tensors must be on one device; ", device_name_,
             " is on ", to_string(device_), " but ", name, " = ", describe(t));
    bytes_ += static_cast<double>(t.nbytes());
  }

 private:
  const char* op_;
  const char* device_name_ = nullptr;
  Device device_;
  const char* dtype_name_ = nullptr;
  DType dtype_ = DType::f32;
  double bytes_ = 0.0;
  double flops_ = 0.0;
};

// Adds the call to the thread's op counts, if any.
void count(const Args& args) {
  if (OpCounts* counts = current_op_counts()) counts->add(args.op(), args.flops(), args.bytes());
}

// qkv [B, T, 3C] with C split into num_heads heads; returns C.
int64_t attention_channels(const Args& args, const Tensor& qkv, int num_heads) {
  args.shape("qkv", qkv, "[B, T, 3C]", {kAny, kAny, kAny});
  MT_CHECK(qkv.dim(2) % 3 == 0, args.op(),
           ": qkv must be [B, T, 3C] with a last dim divisible by 3, got ", qkv.describe());
  const int64_t channels = qkv.dim(2) / 3;
  MT_CHECK(num_heads >= 1 && channels % num_heads == 0, args.op(),
           ": num_heads must divide C = ", channels, ", got num_heads = ", num_heads);
  return channels;
}

// One T x T product over every query head (Q K^T, P V, or one of their gradients): 2 T^2 hd per
// head and sequence, all heads together H hd = channels. The kernels compute the full square
// (op_counts.h): forward two products, backward five (P recomputed, dV, dP, dQ, dK).
double attention_product_flops(int64_t batch, int64_t seq, int64_t channels) {
  return 2.0 * static_cast<double>(batch) * static_cast<double>(seq) * static_cast<double>(seq) *
         static_cast<double>(channels);
}
constexpr double kAttentionForwardProducts = 2.0;
constexpr double kAttentionBackwardProducts = 5.0;

// q [B, T, H * hd] with num_heads = H, k and v [B, T, KV * hd] with num_kv_heads = KV dividing H;
// returns hd.
int64_t grouped_head_dim(const Args& args, const Tensor& q, const Tensor& k, const Tensor& v,
                         int num_heads, int num_kv_heads) {
  args.shape("q", q, "[B, T, H * hd]", {kAny, kAny, kAny});
  MT_CHECK(num_heads >= 1 && q.dim(2) % num_heads == 0, args.op(),
           ": num_heads must divide q's last dim H * hd = ", q.dim(2),
           ", got num_heads = ", num_heads);
  MT_CHECK(num_kv_heads >= 1 && num_heads % num_kv_heads == 0, args.op(),
           ": num_kv_heads must divide num_heads = ", num_heads,
           ", got num_kv_heads = ", num_kv_heads);
  const int64_t head_dim = q.dim(2) / num_heads;
  const Shape kv_shape{q.dim(0), q.dim(1), num_kv_heads * head_dim};
  args.shape("k", k, "[B, T, KV * hd]", kv_shape);
  args.shape("v", v, "[B, T, KV * hd]", kv_shape);
  return head_dim;
}

// x [B, T, heads * head_dim] rotated in place: head_dim even, theta a positive base, positions
// counted from first_position >= 0.
void check_rotary(Args& args, const char* name, const Tensor& x, int64_t head_dim, float theta,
                  int64_t first_position) {
  args.compute(name, x);
  args.shape(name, x, "[B, T, heads * head_dim]", {kAny, kAny, kAny});
  MT_CHECK(head_dim >= 2 && head_dim % 2 == 0, args.op(), ": head_dim must be even and >= 2, got ",
           head_dim);
  MT_CHECK(x.dim(2) % head_dim == 0, args.op(), ": ", name,
           " must be [B, T, heads * head_dim] with a last dim divisible by head_dim = ", head_dim,
           ", got ", x.describe());
  MT_CHECK(std::isfinite(theta) && theta > 0.0f, args.op(), ": theta must be finite and > 0, got ",
           theta);
  MT_CHECK(first_position >= 0, args.op(), ": first_position must be >= 0, got ", first_position);
}

// The first id of the vocabulary slice a rank's embedding table or logits hold.
void check_vocab_start(const Args& args, int64_t vocab_start) {
  MT_CHECK(vocab_start >= 0, args.op(), ": vocab_start must be >= 0, got ", vocab_start);
}

// logits [..., V] with V >= 1 (a softmax needs an entry); returns the number of rows N.
int64_t logit_rows(const Args& args, const Tensor& logits) {
  MT_CHECK(logits.ndim() >= 1 && logits.dim(-1) >= 1, args.op(),
           ": logits must be [..., V] with V >= 1, got ", logits.describe());
  return args.rows("logits", logits, "[N, V]", logits.dim(-1));
}

#if !MESHTRAIN_HAS_CUDA
[[noreturn]] void no_cuda(const Args& args) {
  throw NotSupported(detail::concat(args.op(), ": tensors are on ", to_string(args.device()),
                                    " but this build has no CUDA"));
}
#endif

}  // namespace

// Every call counts its work first (op_counts.h; nothing unless the thread counts).
// On shape-only (meta) tensors a kernel has checked its arguments and computes nothing: it
// returns what its result type's value-initialisation gives (sum_squares: 0).
// Otherwise runs the implementation of `fn` for the device the arguments live on, as one `kernel`
// span of the rank's trace named by the op (core/trace; nothing but a thread-local load when not
// tracing). While this thread is traced, a CUDA kernel's span waits for the kernel to finish, so
// that it measures the run on the device rather than the launch (a traced GPU run is slower for
// it).
#if MESHTRAIN_HAS_CUDA
namespace {
template <typename Call>
auto traced_cuda_call(Device device, Call&& call) {
  if constexpr (std::is_void_v<decltype(call())>) {
    call();
    if (trace::current()) device_synchronize(device);
  } else {
    auto result = call();
    if (trace::current()) device_synchronize(device);
    return result;
  }
}
}  // namespace
#define MT_DISPATCH(args, fn, ...)                                                   \
  do {                                                                               \
    count(args);                                                                     \
    if ((args).device().is_meta()) return decltype(cpu::fn(__VA_ARGS__))();          \
    const trace::Scope mt_kernel_span(trace::Kind::kernel, (args).op());             \
    if (!(args).device().is_cuda()) return cpu::fn(__VA_ARGS__);                     \
    return traced_cuda_call((args).device(), [&] { return cuda::fn(__VA_ARGS__); }); \
  } while (0)
#else
#define MT_DISPATCH(args, fn, ...)                                          \
  do {                                                                      \
    count(args);                                                            \
    if ((args).device().is_meta()) return decltype(cpu::fn(__VA_ARGS__))(); \
    if ((args).device().is_cuda()) no_cuda(args);                           \
    const trace::Scope mt_kernel_span(trace::Kind::kernel, (args).op());    \
    return cpu::fn(__VA_ARGS__);                                            \
  } while (0)
#endif

void matmul(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
            float alpha, float beta) {
  Args args("matmul");
  args.compute("out", out);
  args.compute("a", a);
  args.compute("b", b);
  args.shape("out", out, "[M, N]", {kAny, kAny});
  const int64_t m = out.dim(0), n = out.dim(1);
  args.shape("a", a, trans_a ? "[K, M] (trans_a)" : "[M, K]",
             trans_a ? Shape{kAny, m} : Shape{m, kAny});
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  args.shape("b", b, trans_b ? "[N, K] (trans_b)" : "[K, N]", trans_b ? Shape{n, k} : Shape{k, n});
  args.set_flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  MT_DISPATCH(args, matmul, out, a, b, trans_a, trans_b, alpha, beta);
}

void linear_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias) {
  Args args("linear_forward");
  args.compute("in", in);
  args.compute("weight", weight);
  args.compute("out", out);
  const bool has_bias = args.optional_compute("bias", bias);
  MT_CHECK(in.ndim() >= 1, "linear_forward: in must be [..., in], got ", in.describe());
  const int64_t in_features = in.dim(-1);
  args.shape("weight", weight, "[in, out]", {in_features, kAny});
  const int64_t out_features = weight.dim(1);
  const int64_t rows = args.rows("in", in, "[N, in]", in_features);
  args.rows_like("out", out, "[N, out]", rows, out_features);
  if (has_bias) args.shape("bias", bias, "[out]", {out_features});
  args.set_flops(2.0 * static_cast<double>(rows) * static_cast<double>(weight.numel()));
  MT_DISPATCH(args, linear_forward, out, in, weight, bias);
}

void linear_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                     const Tensor& d_out, const Tensor& in, const Tensor& weight) {
  Args args("linear_backward");
  args.compute("in", in);
  args.compute("weight", weight);
  args.compute("d_out", d_out);
  const bool has_d_weight = args.optional_compute("d_weight", d_weight);
  const bool has_d_in = args.optional_compute("d_in", d_in);
  const bool has_d_bias = args.optional_compute("d_bias", d_bias);
  args.shape("weight", weight, "[in, out]", {kAny, kAny});
  const int64_t in_features = weight.dim(0), out_features = weight.dim(1);
  const int64_t rows = args.rows("in", in, "[N, in]", in_features);
  args.rows_like("d_out", d_out, "[N, out]", rows, out_features);
  if (has_d_weight) args.shape("d_weight", d_weight, "[in, out] like weight", weight.shape());
  if (has_d_in) args.rows_like("d_in", d_in, "[N, in] like in", rows, in_features);
  if (has_d_bias) args.shape("d_bias", d_bias, "[out]", {out_features});
  const int gemms = (has_d_in ? 1 : 0) + (has_d_weight ? 1 : 0);
  args.set_flops(2.0 * gemms * static_cast<double>(rows) * static_cast<double>(weight.numel()));
  MT_DISPATCH(args, linear_backward, d_in, d_weight, d_bias, d_out, in, weight);
}

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, float eps) {
  Args args("layernorm_forward");
  args.compute("in", in);
  args.compute("weight", weight);
  args.compute("bias", bias);
  args.compute("out", out);
  args.of_dtype("mean", mean, DType::f32);
  args.of_dtype("rstd", rstd, DType::f32);
  args.shape("weight", weight, "[C]", {kAny});
  const int64_t channels = weight.dim(0);
  args.shape("bias", bias, "[C]", {channels});
  const int64_t rows = args.rows("in", in, "[N, C]", channels);
  args.rows_like("out", out, "[N, C] like in", rows, channels);
  args.numel("mean", mean, "one value per row, N", rows);
  args.numel("rstd", rstd, "one value per row, N", rows);
  MT_CHECK(eps >= 0.0f, "layernorm_forward: eps must be >= 0, got ", eps);
  MT_DISPATCH(args, layernorm_forward, out, mean, rstd, in, weight, bias, eps);
}

void layernorm_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                        const Tensor& d_out, const Tensor& in, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) {
  Args args("layernorm_backward");
  args.compute("in", in);
  args.compute("weight", weight);
  args.compute("d_out", d_out);
  args.compute("d_in", d_in);
  args.compute("d_weight", d_weight);
  args.compute("d_bias", d_bias);
  args.of_dtype("mean", mean, DType::f32);
  args.of_dtype("rstd", rstd, DType::f32);
  args.shape("weight", weight, "[C]", {kAny});
  const int64_t channels = weight.dim(0);
  args.shape("d_weight", d_weight, "[C]", {channels});
  args.shape("d_bias", d_bias, "[C]", {channels});
  const int64_t rows = args.rows("in", in, "[N, C]", channels);
  args.rows_like("d_out", d_out, "[N, C] like in", rows, channels);
  args.rows_like("d_in", d_in, "[N, C] like in", rows, channels);
  args.numel("mean", mean, "one value per row, N", rows);
  args.numel("rstd", rstd, "one value per row, N", rows);
  MT_DISPATCH(args, layernorm_backward, d_in, d_weight, d_bias, d_out, in, weight, mean, rstd);
}

void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                     float eps) {
  Args args("rmsnorm_forward");
  args.compute("in", in);
  args.compute("weight", weight);
  args.compute("out", out);
  args.of_dtype("rstd", rstd, DType::f32);
  args.shape("weight", weight, "[C]", {kAny});
  const int64_t channels = weight.dim(0);
  const int64_t rows = args.rows("in", in, "[N, C]", channels);
  args.rows_like("out", out, "[N, C] like in", rows, channels);
  args.numel("rstd", rstd, "one value per row, N", rows);
  MT_CHECK(eps >= 0.0f, "rmsnorm_forward: eps must be >= 0, got ", eps);
  MT_DISPATCH(args, rmsnorm_forward, out, rstd, in, weight, eps);
}

void rmsnorm_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_out,
                      const Tensor& in, const Tensor& weight, const Tensor& rstd) {
  Args args("rmsnorm_backward");
  args.compute("in", in);
  args.compute("weight", weight);
  args.compute("d_out", d_out);
  args.compute("d_in", d_in);
  const bool has_d_weight = args.optional_compute("d_weight", d_weight);
  args.of_dtype("rstd", rstd, DType::f32);
  args.shape("weight", weight, "[C]", {kAny});
  const int64_t channels = weight.dim(0);
  if (has_d_weight) args.shape("d_weight", d_weight, "[C]", {channels});
  const int64_t rows = args.rows("in", in, "[N, C]", channels);
  args.rows_like("d_out", d_out, "[N, C] like in", rows, channels);
  args.rows_like("d_in", d_in, "[N, C] like in", rows, channels);
  args.numel("rstd", rstd, "one value per row, N", rows);
  MT_DISPATCH(args, rmsnorm_backward, d_in, d_weight, d_out, in, weight, rstd);
}

void rotary_forward(const Tensor& x, int64_t head_dim, float theta, int64_t first_position) {
  Args args("rotary_forward");
  check_rotary(args, "x", x, head_dim, theta, first_position);
  MT_DISPATCH(args, rotary_forward, x, head_dim, theta, first_position);
}

void rotary_backward(const Tensor& d_x, int64_t head_dim, float theta, int64_t first_position) {
  Args args("rotary_backward");
  check_rotary(args, "d_x", d_x, head_dim, theta, first_position);
  MT_DISPATCH(args, rotary_backward, d_x, head_dim, theta, first_position);
}

void swiglu_forward(const Tensor& out, const Tensor& gate, const Tensor& up) {
  Args args("swiglu_forward");
  args.compute("gate", gate);
  args.compute("up", up);
  args.compute("out", out);
  args.numel("up", up, "the elements of gate", gate.numel());
  args.numel("out", out, "the elements of gate", gate.numel());
  MT_DISPATCH(args, swiglu_forward, out, gate, up);
}

void swiglu_backward(const Tensor& d_gate, const Tensor& d_up, const Tensor& d_out,
                     const Tensor& gate, const Tensor& up) {
  Args args("swiglu_backward");
  args.compute("gate", gate);
  args.compute("up", up);
  args.compute("d_out", d_out);
  args.compute("d_gate", d_gate);
  args.compute("d_up", d_up);
  args.numel("up", up, "the elements of gate", gate.numel());
  args.numel("d_out", d_out, "the elements of gate", gate.numel());
  args.numel("d_gate", d_gate, "the elements of gate", gate.numel());
  args.numel("d_up", d_up, "the elements of gate", gate.numel());
  MT_DISPATCH(args, swiglu_backward, d_gate, d_up, d_out, gate, up);
}

void gelu_forward(const Tensor& out, const Tensor& in) {
  Args args("gelu_forward");
  args.compute("in", in);
  args.compute("out", out);
  args.numel("out", out, "the elements of in", in.numel());
  MT_DISPATCH(args, gelu_forward, out, in);
}

void gelu_backward(const Tensor& d_in, const Tensor& d_out, const Tensor& in) {
  Args args("gelu_backward");
  args.compute("in", in);
  args.compute("d_out", d_out);
  args.compute("d_in", d_in);
  args.numel("d_out", d_out, "the elements of in", in.numel());
  args.numel("d_in", d_in, "the elements of in", in.numel());
  MT_DISPATCH(args, gelu_backward, d_in, d_out, in);
}

void attention_forward(const Tensor& out, const Tensor& qkv, int num_heads) {
  Args args("attention_forward");
  args.compute("qkv", qkv);
  args.compute("out", out);
  const int64_t channels = attention_channels(args, qkv, num_heads);
  args.shape("out", out, "[B, T, C]", {qkv.dim(0), qkv.dim(1), channels});
  args.set_flops(kAttentionForwardProducts *
                 attention_product_flops(qkv.dim(0), qkv.dim(1), channels));
  MT_DISPATCH(args, attention_forward, out, qkv, num_heads);
}

void attention_backward(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv,
                        int num_heads) {
  Args args("attention_backward");
  args.compute("qkv", qkv);
  args.compute("d_out", d_out);
  args.compute("d_qkv", d_qkv);
  const int64_t channels = attention_channels(args, qkv, num_heads);
  args.shape("d_out", d_out, "[B, T, C]", {qkv.dim(0), qkv.dim(1), channels});
  args.shape("d_qkv", d_qkv, "[B, T, 3C] like qkv", qkv.shape());
  args.set_flops(kAttentionBackwardProducts *
                 attention_product_flops(qkv.dim(0), qkv.dim(1), channels));
  MT_DISPATCH(args, attention_backward, d_qkv, d_out, qkv, num_heads);
}

void grouped_attention_forward(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                               int num_heads, int num_kv_heads) {
  Args args("grouped_attention_forward");
  args.compute("q", q);
  args.compute("k", k);
  args.compute("v", v);
  args.compute("out", out);
  grouped_head_dim(args, q, k, v, num_heads, num_kv_heads);
  args.shape("out", out, "[B, T, H * hd] like q", q.shape());
  args.set_flops(kAttentionForwardProducts * attention_product_flops(q.dim(0), q.dim(1), q.dim(2)));
  MT_DISPATCH(args, grouped_attention_forward, out, q, k, v, num_heads, num_kv_heads);
}

void grouped_attention_backward(const Tensor& d_q, const Tensor& d_k, const Tensor& d_v,
                                const Tensor& d_out, const Tensor& q, const Tensor& k,
                                const Tensor& v, int num_heads, int num_kv_heads) {
  Args args("grouped_attention_backward");
  args.compute("q", q);
  args.compute("k", k);
  args.compute("v", v);
  args.compute("d_out", d_out);
  args.compute("d_q", d_q);
  args.compute("d_k", d_k);
  args.compute("d_v", d_v);
  grouped_head_dim(args, q, k, v, num_heads, num_kv_heads);
  args.shape("d_out", d_out, "[B, T, H * hd] like q", q.shape());
  args.shape("d_q", d_q, "[B, T, H * hd] like q", q.shape());
  args.shape("d_k", d_k, "[B, T, KV * hd] like k", k.shape());
  args.shape("d_v", d_v, "[B, T, KV * hd] like v", v.shape());
  args.set_flops(kAttentionBackwardProducts *
                 attention_product_flops(q.dim(0), q.dim(1), q.dim(2)));
  MT_DISPATCH(args, grouped_attention_backward, d_q, d_k, d_v, d_out, q, k, v, num_heads,
              num_kv_heads);
}

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                       int64_t vocab_start) {
  Args args("embedding_forward");
  args.compute("table", table);
  args.compute("out", out);
  args.of_dtype("ids", ids, DType::i32);
  args.shape("table", table, "[V, C]", {kAny, kAny});
  args.rows_like("out", out, "[N, C] (N = ids, C = table's)", ids.numel(), table.dim(1));
  check_vocab_start(args, vocab_start);
  MT_DISPATCH(args, embedding_forward, out, ids, table, vocab_start);
}

void embedding_backward(const Tensor& d_table, const Tensor& d_out, const Tensor& ids,
                        int64_t vocab_start) {
  Args args("embedding_backward");
  args.compute("d_table", d_table);
  args.compute("d_out", d_out);
  args.of_dtype("ids", ids, DType::i32);
  args.shape("d_table", d_table, "[V, C]", {kAny, kAny});
  args.rows_like("d_out", d_out, "[N, C] (N = ids, C = d_table's)", ids.numel(), d_table.dim(1));
  check_vocab_start(args, vocab_start);
  MT_DISPATCH(args, embedding_backward, d_table, d_out, ids, vocab_start);
}

void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits) {
  Args args("cross_entropy_row_max");
  args.compute("logits", logits);
  args.of_dtype("row_max", row_max, DType::f32);
  const int64_t rows = logit_rows(args, logits);
  args.numel("row_max", row_max, "one value per row of logits, N", rows);
  MT_DISPATCH(args, cross_entropy_row_max, row_max, logits);
}

void cross_entropy_partials(const Tensor& sum_exp, const Tensor& target_logit, const Tensor& logits,
                            const Tensor& targets, const Tensor& row_max, int64_t vocab_start) {
  Args args("cross_entropy_partials");
  args.compute("logits", logits);
  args.of_dtype("targets", targets, DType::i32);
  args.of_dtype("row_max", row_max, DType::f32);
  args.of_dtype("sum_exp", sum_exp, DType::f32);
  args.of_dtype("target_logit", target_logit, DType::f32);
  const int64_t rows = logit_rows(args, logits);
  args.numel("targets", targets, "one id per row of logits, N", rows);
  args.numel("row_max", row_max, "one value per row of logits, N", rows);
  args.numel("sum_exp", sum_exp, "one value per row of logits, N", rows);
  args.numel("target_logit", target_logit, "one value per row of logits, N", rows);
  check_vocab_start(args, vocab_start);
  MT_DISPATCH(args, cross_entropy_partials, sum_exp, target_logit, logits, targets, row_max,
              vocab_start);
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                            const Tensor& row_max, const Tensor& sum_exp, int64_t vocab_start,
                            float scale) {
  Args args("cross_entropy_backward");
  args.compute("logits", logits);
  args.compute("d_logits", d_logits);
  args.of_dtype("targets", targets, DType::i32);
  args.of_dtype("row_max", row_max, DType::f32);
  args.of_dtype("sum_exp", sum_exp, DType::f32);
  const int64_t rows = logit_rows(args, logits);
  args.rows_like("d_logits", d_logits, "[N, V] like logits", rows, logits.dim(-1));
  args.numel("targets", targets, "one id per row of logits, N", rows);
  args.numel("row_max", row_max, "one value per row of logits, N", rows);
  args.numel("sum_exp", sum_exp, "one value per row of logits, N", rows);
  check_vocab_start(args, vocab_start);
  MT_CHECK(std::isfinite(scale), "cross_entropy_backward: scale must be finite, got ", scale);
  MT_DISPATCH(args, cross_entropy_backward, d_logits, logits, targets, row_max, sum_exp,
              vocab_start, scale);
}

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  Args args("add");
  args.compute("a", a);
  args.compute("b", b);
  args.compute("out", out);
  args.numel("b", b, "the elements of a", a.numel());
  args.numel("out", out, "the elements of a", a.numel());
  MT_DISPATCH(args, add, out, a, b);
}

void axpy(const Tensor& y, float alpha, const Tensor& x) {
  Args args("axpy");
  args.compute("y", y);
  args.compute("x", x);
  args.numel("x", x, "the elements of y", y.numel());
  MT_DISPATCH(args, axpy, y, alpha, x);
}

void scale(const Tensor& x, float alpha) {
  Args args("scale");
  args.compute("x", x);
  MT_DISPATCH(args, scale, x, alpha);
}

double sum_squares(const std::vector<Tensor>& xs) {
  std::vector<std::string> names;  // outlive args, which keeps pointers to them
  for (size_t i = 0; i < xs.size(); ++i) names.push_back(detail::concat("xs[", i, "]"));
  Args args("sum_squares");
  for (size_t i = 0; i < xs.size(); ++i) args.compute(names[i].c_str(), xs[i]);
  MT_DISPATCH(args, sum_squares, xs);
}

void cast(const Tensor& out, const Tensor& in) {
  Args args("cast");
  args.tensor("in", in);
  args.tensor("out", out);
  const bool float_pair = (in.dtype() == DType::f32 && out.dtype() == DType::bf16) ||
                          (in.dtype() == DType::bf16 && out.dtype() == DType::f32);
  MT_CHECK(float_pair || in.dtype() == out.dtype(),
           "cast: converts f32 <-> bf16 or copies within one dtype, got in = ", in.describe(),
           " and out = ", out.describe());
  args.numel("out", out, "the elements of in", in.numel());
  MT_DISPATCH(args, cast, out, in);
}

void cast_columns(const Tensor& out, int64_t out_col, const Tensor& in, int64_t in_col,
                  int64_t cols) {
  Args args("cast_columns");
  args.tensor("in", in);
  args.tensor("out", out);
  const bool float_pair = (in.dtype() == DType::f32 && out.dtype() == DType::bf16) ||
                          (in.dtype() == DType::bf16 && out.dtype() == DType::f32);
  MT_CHECK(float_pair || in.dtype() == out.dtype(),
           "cast_columns: converts f32 <-> bf16 or copies within one dtype, got in = ",
           in.describe(), " and out = ", out.describe());
  args.shape("in", in, "[rows, in columns]", {kAny, kAny});
  args.shape("out", out, "[rows, out columns]", {in.dim(0), kAny});
  MT_CHECK(cols >= 0 && in_col >= 0 && out_col >= 0 && in_col + cols <= in.dim(1) &&
               out_col + cols <= out.dim(1),
           "cast_columns: columns [", in_col, ", ", in_col + cols, ") of in = ", in.describe(),
           " into columns [", out_col, ", ", out_col + cols, ") of out = ", out.describe(),
           " must lie within both");
  const int64_t elements = in.dim(0) * cols;
  args.set_bytes(static_cast<double>(elements) *
                 static_cast<double>(dtype_size(in.dtype()) + dtype_size(out.dtype())));
  MT_DISPATCH(args, cast_columns, out, out_col, in, in_col, cols);
}

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const AdamWHyper& hyper, int64_t step) {
  Args args("adamw_step");
  args.of_dtype("param", param, DType::f32);
  args.of_dtype("grad", grad, DType::f32);
  args.of_dtype("exp_avg", exp_avg, DType::f32);
  args.of_dtype("exp_avg_sq", exp_avg_sq, DType::f32);
  args.numel("grad", grad, "the elements of param", param.numel());
  args.numel("exp_avg", exp_avg, "the elements of param", param.numel());
  args.numel("exp_avg_sq", exp_avg_sq, "the elements of param", param.numel());
  MT_CHECK(step >= 1, "adamw_step: step counts from 1, got ", step);
  MT_CHECK(hyper.lr >= 0.0f, "adamw_step: lr must be >= 0, got ", hyper.lr);
  MT_CHECK(hyper.beta1 >= 0.0f && hyper.beta1 < 1.0f, "adamw_step: beta1 must be in [0, 1), got ",
           hyper.beta1);
  MT_CHECK(hyper.beta2 >= 0.0f && hyper.beta2 < 1.0f, "adamw_step: beta2 must be in [0, 1), got ",
           hyper.beta2);
  MT_CHECK(hyper.eps > 0.0f, "adamw_step: eps must be > 0, got ", hyper.eps);
  MT_CHECK(hyper.weight_decay >= 0.0f, "adamw_step: weight_decay must be >= 0, got ",
           hyper.weight_decay);
  MT_DISPATCH(args, adamw_step, param, grad, exp_avg, exp_avg_sq, hyper, step);
}

}  // namespace meshtrain::ops
