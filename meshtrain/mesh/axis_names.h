// The names of the mesh axes, spelled once. The mesh axes, outermost first, are pp, dp_replicate,
// dp_shard and tp (see mesh_layout.h); dp is not a mesh axis but the data axes dp_replicate x
// dp_shard flattened (those present), which every DeviceMesh creates and a Layout may name.
#pragma once

#include <array>
#include <string_view>

namespace meshtrain::mesh_axis {

inline constexpr std::string_view pp = "pp";
inline constexpr std::string_view dp_replicate = "dp_replicate";
inline constexpr std::string_view dp_shard = "dp_shard";
inline constexpr std::string_view tp = "tp";
inline constexpr std::string_view dp = "dp";

// The mesh axes dp flattens, outermost first.
inline constexpr std::array<std::string_view, 2> dp_axes{dp_replicate, dp_shard};

}  // namespace meshtrain::mesh_axis
