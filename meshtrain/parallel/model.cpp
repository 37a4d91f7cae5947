#include "meshtrain/parallel/model.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

std::vector<nn::NamedModule> Model::modules() {
  std::vector<nn::NamedModule> out;
  for (Layer* layer : layers()) layer->add_modules(out);
  return out;
}

Shape Layer::hidden_shape(const MicroBatch&) {
  throw NotSupported(detail::concat("layer '", name(), "' does not say the shape of its hidden "
                                    "state, which pipeline parallelism needs"));
}

Shape Model::activation_shape(const MicroBatch& mb) {
  const std::vector<Layer*> all = layers();
  MT_CHECK(!all.empty(), "a model without layers has no activations");
  return all.front()->hidden_shape(mb);
}

}  // namespace meshtrain
