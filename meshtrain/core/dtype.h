// Element types: f32 for master state and CPU compute, bf16 for mixed precision, i32 for token ids.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace meshtrain {

enum class DType { f32, bf16, i32 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
DType parse_dtype(std::string_view name);  // "f32" | "bf16" | "i32"; InvalidArgument otherwise

}  // namespace meshtrain
