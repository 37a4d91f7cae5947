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

bool matches_pattern(std::string_view pattern, std::string_view name) {
  while (true) {
    const size_t p_dot = pattern.find('.'), n_dot = name.find('.');
    const std::string_view p_part = pattern.substr(0, p_dot), n_part = name.substr(0, n_dot);
    if (p_part != "*" && p_part != n_part) return false;
    if (p_dot == std::string_view::npos || n_dot == std::string_view::npos)
      return p_dot == n_dot;
    pattern.remove_prefix(p_dot + 1);
    name.remove_prefix(n_dot + 1);
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
