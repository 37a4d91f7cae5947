// Where a tensor lives: the host, one CUDA device, or nowhere: a shape-only ("meta") tensor has a
// shape, a dtype and a size its allocation is counted by, but no storage, and kernels on it check
// their arguments and compute nothing. A dry run (meshtrain train --dry-run) runs the real code
// paths on meta tensors to count what a run would hold and move, at any size, without computing.
#pragma once

#include <string>
#include <string_view>

namespace meshtrain {

enum class DeviceKind { cpu, cuda, meta };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int index) { return {DeviceKind::cuda, index}; }
  static Device meta() { return {DeviceKind::meta, 0}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  bool is_meta() const { return kind == DeviceKind::meta; }
  bool operator==(const Device&) const = default;
};

std::string to_string(const Device& device);    // "cpu" | "cuda:N" | "meta"
Device parse_device(std::string_view text);     // InvalidArgument on anything else

}  // namespace meshtrain
