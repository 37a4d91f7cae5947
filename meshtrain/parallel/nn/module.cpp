#include "meshtrain/parallel/nn/module.h"

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"

namespace meshtrain::nn {

std::string_view tp_style_name(TpStyle style) {
  switch (style) {
    case TpStyle::colwise: return "colwise";
    case TpStyle::rowwise: return "rowwise";
    case TpStyle::vocab: return "vocab";
    case TpStyle::heads: return "heads";
    case TpStyle::sequence: return "sequence";
  }
  return "unknown";
}

// Part by part, a character at a time: a plan's rules meet every module of the model, and most
// differ within a name's first characters.
bool matches_pattern(std::string_view pattern, std::string_view name) {
  size_t p = 0, n = 0;
  while (true) {
    const bool wildcard = p < pattern.size() && pattern[p] == '*' &&
                          (p + 1 == pattern.size() || pattern[p + 1] == '.');
    if (wildcard) {
      ++p;
      while (n < name.size() && name[n] != '.') ++n;
    } else {
      for (; p < pattern.size() && pattern[p] != '.'; ++p, ++n)
        if (n == name.size() || name[n] != pattern[p]) return false;
      if (n < name.size() && name[n] != '.') return false;
    }
    // Both at the end of a part: a dot or the end of the string.
    if (p == pattern.size() || n == name.size()) return p == pattern.size() && n == name.size();
    ++p;
    ++n;
  }
}

void Module::check_parallel(TpStyle style, int /*tp*/) const {
  throw InvalidArgument(
      detail::concat("this module has no tensor-parallel form for style '", tp_style_name(style), "'"));
}

void Module::parallelize(TpStyle style, const TpSetup& setup) {
  check_parallel(style, setup.tp.size());
}

void shard_on_tp(Parameter& param, const Placement& placement, const TpSetup& setup) {
  const Layout layout = Layout().then(std::string(mesh_axis::tp), placement);
  if (param.layout() == layout) return;
  MT_CHECK(param.layout() == Layout(), "parameter '", param.name(), "' is laid out as ",
           param.layout().to_string(), " already; tensor parallelism wants ", layout.to_string());
  param.set_layout(layout, layout.local_shape(param.global_shape(), setup.mesh, setup.rank));
}

}  // namespace meshtrain::nn
