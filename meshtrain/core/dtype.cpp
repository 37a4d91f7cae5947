#include "meshtrain/core/dtype.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::i32: return 4;
  }
  throw InvalidArgument("unknown dtype");
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
  }
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  if (name == "i32") return DType::i32;
  throw InvalidArgument(detail::concat("unknown dtype '", name, "', expected f32, bf16 or i32"));
}

}  // namespace meshtrain
