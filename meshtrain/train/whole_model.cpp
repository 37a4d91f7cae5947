#include "meshtrain/train/whole_model.h"

#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/train/training_checkpoint.h"

namespace meshtrain {

namespace {
void fill(Model& model, const ParameterSource& values) {
  for (Parameter* p : model.parameters()) {
    p->set_value(Tensor::empty(p->global_shape(), DType::f32, Device::cpu()));
    fill_local(values, *p, Layout(), MeshLayout(), 0, p->value());  // whole, on one rank
  }
}
}  // namespace

WholeModel load_whole_model(const std::string& path, const ModelRegistry& models,
                            const TextOptions& given) {
  if (is_checkpoint_path(path)) {
    CheckpointReader reader(find_checkpoint(path, "the model"));
    const std::string source = "checkpoint '" + reader.path() + "'";
    const ModelSpecPtr stored = checkpoint_model(reader, models);
    ModelSpecPtr spec = models.agreeing(stored->family(), stored->options(), given, source);
    std::unique_ptr<Model> model = spec->build(Device::cpu());
    fill(*model, CheckpointValues(reader));
    return {std::move(spec), std::move(model), source};
  }
  const std::string weights = hf_weights_path(path);
  ModelSpecPtr spec = models.from_safetensors(weights, given);
  std::unique_ptr<Model> model = spec->build(Device::cpu());
  fill(*model, SafetensorsValues(weights, model->parameters()));
  return {std::move(spec), std::move(model), "'" + weights + "'"};
}

}  // namespace meshtrain
