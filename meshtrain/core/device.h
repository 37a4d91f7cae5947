// Where a tensor lives: the host or one CUDA device.
#pragma once

#include <string>
#include <string_view>

namespace meshtrain {

enum class DeviceKind { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int index) { return {DeviceKind::cuda, index}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  bool operator==(const Device&) const = default;
};

std::string to_string(const Device& device);  // "cpu" | "cuda:N"
Device parse_device(std::string_view text);     // InvalidArgument on anything else

}  // namespace meshtrain
