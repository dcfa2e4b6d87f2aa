#include "quantize/record.h"

#include "base/version.h"
#include "vllm/family.h"

namespace spk {

nlohmann::ordered_json QuantizeRecord(const QuantizeOptions& options, const QuantPlan& plan,
                                      int64_t group_size, uint64_t source_tensor_bytes,
                                      uint64_t output_tensor_bytes) {
  nlohmann::ordered_json record = {{"version", kSparkulatorVersion},
                                   {"scheme", std::string(plan.options.scheme->name)},
                                   {"method", std::string(QuantMethodName(options.method))}};
  if (IsDraft(plan.family.family)) record["target_precision"] = options.target_precision.Name();
  record["group_size"] = group_size;
  record["source"] = options.source;
  record["family"] = std::string(FamilyName(plan.family.family));
  record["preset"] = std::string(PresetName(plan.options.preset));
  record["data_free"] = true;  // rtn and search both read the weights only, no calibration data
  record["source_tensor_bytes"] = source_tensor_bytes;
  record["output_tensor_bytes"] = output_tensor_bytes;
  nlohmann::ordered_json kept = nlohmann::ordered_json::array();
  for (const TensorPlan& t : plan.tensors) {
    if (!t.is_linear || t.action != TensorAction::kKeep) continue;
    kept.push_back({{"module", t.vllm_module.empty() ? t.tensor : t.vllm_module},
                    {"tensor", t.tensor},
                    {"reason", t.reason}});
  }
  record["kept_dense"] = kept;
  return record;
}

}  // namespace spk
