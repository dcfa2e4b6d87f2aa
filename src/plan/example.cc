#include "plan/example.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "model/model_config.h"
#include "plan/plan.h"
#include "safetensors/checkpoint_writer.h"
#include "tensor/float_convert.h"
#include "vllm/family.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

struct ExampleTensor {
  std::string name;
  std::vector<int64_t> shape;
  enum Fill { kWeight, kOnes, kIndexI64, kMaskBool } fill = kWeight;
};

constexpr int64_t kHeadDim = 64;

int64_t KvHeads(const ExampleOptions& o) {
  return o.kv_heads > 0 ? o.kv_heads : std::max<int64_t>(1, o.hidden / kHeadDim / 2);
}

void AddDecoderLayer(const ExampleOptions& o, const std::string& prefix, int64_t attn_in,
                     std::vector<ExampleTensor>* t) {
  int64_t heads = o.hidden / kHeadDim, kv_heads = KvHeads(o);
  t->push_back({prefix + "input_layernorm.weight", {o.hidden}, ExampleTensor::kOnes});
  t->push_back({prefix + "self_attn.q_proj.weight", {heads * kHeadDim, attn_in}});
  t->push_back({prefix + "self_attn.k_proj.weight", {kv_heads * kHeadDim, attn_in}});
  t->push_back({prefix + "self_attn.v_proj.weight", {kv_heads * kHeadDim, attn_in}});
  t->push_back({prefix + "self_attn.o_proj.weight", {o.hidden, heads * kHeadDim}});
  t->push_back({prefix + "self_attn.q_norm.weight", {kHeadDim}, ExampleTensor::kOnes});
  t->push_back({prefix + "self_attn.k_norm.weight", {kHeadDim}, ExampleTensor::kOnes});
  t->push_back({prefix + "post_attention_layernorm.weight", {o.hidden}, ExampleTensor::kOnes});
  t->push_back({prefix + "mlp.gate_proj.weight", {o.intermediate, o.hidden}});
  t->push_back({prefix + "mlp.up_proj.weight", {o.intermediate, o.hidden}});
  t->push_back({prefix + "mlp.down_proj.weight", {o.hidden, o.intermediate}});
}

Json BaseConfig(const ExampleOptions& o, const char* torch_dtype) {
  int64_t heads = o.hidden / kHeadDim;
  return Json{{"architectures", Json::array({"Qwen3ForCausalLM"})},
              {"attention_bias", false},
              {"attention_dropout", 0.0},
              {"bos_token_id", 1},
              {"eos_token_id", 2},
              {"head_dim", kHeadDim},
              {"hidden_act", "silu"},
              {"hidden_size", o.hidden},
              {"initializer_range", 0.02},
              {"intermediate_size", o.intermediate},
              {"max_position_embeddings", 4096},
              {"model_type", "qwen3"},
              {"num_attention_heads", heads},
              {"num_hidden_layers", o.layers},
              {"num_key_value_heads", KvHeads(o)},
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 1000000.0},
              {"tie_word_embeddings", false},
              {"torch_dtype", torch_dtype},
              {"vocab_size", o.vocab}};
}

Result<std::pair<Json, std::vector<ExampleTensor>>> FamilyLayout(const ExampleOptions& o,
                                                                 const char* torch_dtype) {
  std::vector<ExampleTensor> t;
  Json config = BaseConfig(o, torch_dtype);
  if (o.family == "llm") {
    t.push_back({"model.embed_tokens.weight", {o.vocab, o.hidden}});
    for (int i = 0; i < o.layers; ++i) {
      AddDecoderLayer(o, fmt::format("model.layers.{}.", i), o.hidden, &t);
    }
    t.push_back({"model.norm.weight", {o.hidden}, ExampleTensor::kOnes});
    t.push_back({"lm_head.weight", {o.vocab, o.hidden}});
  } else if (o.family == "dflash") {
    // One target layer id per fc input (default 3: 1, 3, 5), every other layer of the target.
    const int64_t fc_inputs = o.fc_inputs > 0 ? o.fc_inputs : 3;
    const int64_t target_layers =
        o.target_layers > 0 ? o.target_layers : std::max<int64_t>(8, 2 * fc_inputs + 2);
    if (2 * fc_inputs - 1 >= target_layers) {
      return Status::Usage(fmt::format(
          "--target-layers {}: a DFlash example reads target layers 1, 3, ..., {}; use at least {}",
          target_layers, 2 * fc_inputs - 1, 2 * fc_inputs));
    }
    Json ids = Json::array();
    for (int64_t k = 0; k < fc_inputs; ++k) ids.push_back(2 * k + 1);
    config["architectures"] = Json::array({"DFlashDraftModel"});
    config["num_target_layers"] = target_layers;
    config["block_size"] = 16;
    config["dflash_config"] = {{"mask_token_id", o.vocab - 1}, {"target_layer_ids", ids}};
    for (int i = 0; i < o.layers; ++i)
      AddDecoderLayer(o, fmt::format("layers.{}.", i), o.hidden, &t);
    t.push_back({"fc.weight", {o.hidden, o.hidden * fc_inputs}});
    t.push_back({"hidden_norm.weight", {o.hidden}, ExampleTensor::kOnes});
    t.push_back({"norm.weight", {o.hidden}, ExampleTensor::kOnes});
  } else if (o.family == "eagle3" || o.family == "eagle3-speculators") {
    const int64_t target_layers = o.target_layers > 0 ? o.target_layers : 8;
    if (target_layers < 2) {
      return Status::Usage("--target-layers: an EAGLE-3 head needs a target of at least 2 layers");
    }
    const int64_t draft_vocab = o.vocab / 2;
    Json ids = Json::array();
    for (int64_t id : Eagle3AuxLayersFor(target_layers)) ids.push_back(id);
    if (o.family == "eagle3") {
      // vLLM's Eagle3Qwen3ForCausalLM reads the aux layer ids from eagle_config.
      config["architectures"] = Json::array({"Eagle3Qwen3ForCausalLM"});
      config["num_hidden_layers"] = 1;
      config["draft_vocab_size"] = draft_vocab;
      config["num_target_layers"] = target_layers;
      config["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", ids},
                                {"use_aux_hidden_state", true}};
    } else {
      // The speculators format: vLLM builds the draft config from transformer_layer_config and
      // takes the aux layer ids from the top level (transformers_utils/configs/speculators).
      Json layer = BaseConfig(o, torch_dtype);
      layer["num_hidden_layers"] = 1;
      config = Json{{"architectures", Json::array({"Eagle3Speculator"})},
                    {"speculators_model_type", "eagle3"},
                    {"draft_vocab_size", draft_vocab},
                    {"norm_before_residual", false},
                    {"target_hidden_size", nullptr},
                    {"eagle_aux_hidden_state_layer_ids", ids},
                    {"num_target_layers", target_layers},
                    {"transformer_layer_config", layer},
                    {"speculators_config",
                     {{"algorithm", "eagle3"},
                      {"proposal_methods",
                       Json::array({{{"proposal_type", "greedy"}, {"speculative_tokens", 3}}})},
                      {"default_proposal_method", "greedy"},
                      {"verifier",
                       {{"name_or_path", "example/target"},
                        {"architectures", Json::array({"Qwen3ForCausalLM"})}}}}},
                    {"torch_dtype", torch_dtype}};
    }
    t.push_back({"embed_tokens.weight", {o.vocab, o.hidden}});
    AddDecoderLayer(o, "layers.0.", 2 * o.hidden, &t);
    t.push_back({"layers.0.hidden_norm.weight", {o.hidden}, ExampleTensor::kOnes});
    t.push_back({"fc.weight", {o.hidden, 3 * o.hidden}});
    t.push_back({"norm.weight", {o.hidden}, ExampleTensor::kOnes});
    t.push_back({"lm_head.weight", {draft_vocab, o.hidden}});
    t.push_back({"d2t", {draft_vocab}, ExampleTensor::kIndexI64});
    t.push_back({"t2d", {o.vocab}, ExampleTensor::kMaskBool});
  } else {
    return Status::Usage(fmt::format(
        "unknown example family '{}': use dflash, eagle3, eagle3-speculators or llm", o.family));
  }
  return std::make_pair(std::move(config), std::move(t));
}

// Weights ~ N(0, 1/sqrt(in)) with a few outlier input columns (x8), as trained LLM weights show.
std::vector<float> WeightValues(const ExampleTensor& t, std::mt19937_64& rng) {
  int64_t rows = t.shape[0], cols = t.shape.size() > 1 ? t.shape[1] : 1;
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = normal(rng);
  for (int64_t c = 0; c < cols; c += 97) {
    for (int64_t r = 0; r < rows; ++r) v[r * cols + c] *= 8.0f;
  }
  return v;
}

std::vector<uint8_t> TensorBytes(const ExampleTensor& t, DType dtype, std::mt19937_64& rng) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  if (t.fill == ExampleTensor::kIndexI64) {
    std::vector<uint8_t> out(static_cast<size_t>(n) * 8);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = i;  // d2t holds offsets draft id -> target id
      std::memcpy(out.data() + i * 8, &v, 8);
    }
    return out;
  }
  if (t.fill == ExampleTensor::kMaskBool) {
    std::vector<uint8_t> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[i] = i % 2 == 0;
    return out;
  }
  std::vector<float> values = t.fill == ExampleTensor::kOnes
                                  ? std::vector<float>(static_cast<size_t>(n), 1.0f)
                                  : WeightValues(t, rng);
  std::vector<uint8_t> out(values.size() * DTypeBits(dtype) / 8);
  ConvertFromFloat(dtype, values.data(), out.data(), values.size());
  return out;
}

DType DTypeOf(const ExampleTensor& t, DType float_dtype) {
  if (t.fill == ExampleTensor::kIndexI64) return DType::kI64;
  if (t.fill == ExampleTensor::kMaskBool) return DType::kBool;
  return float_dtype;
}

// Each tensor is one group of one block that draws its values from `rng` when it runs. The writer
// runs groups one at a time in the order they were added, so the values come out of the random
// stream in declaration order, shard after shard, whatever thread runs them.
TensorProducer ExampleTensorProducer(const ExampleTensor& t, DType dtype, std::mt19937_64* rng) {
  TensorProducer p;
  p.write_block = [t, dtype, rng](size_t, const TensorSink& out) {
    return out.Write(0, 0, TensorBytes(t, dtype, *rng));
  };
  return p;
}

Result<DType> ParseExampleDType(const std::string& name) {
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  if (name == "F32") return DType::kF32;
  return Status::Usage(fmt::format("--dtype {}: use BF16, F16 or F32", name));
}

}  // namespace

Status WriteExampleCheckpoint(const ExampleOptions& o, FileSystem* fs) {
  if (o.shards < 1) return Status::Usage("--shards must be at least 1");
  // Bounds that keep every shape product far from overflow (an example is small by design).
  constexpr int64_t kMaxDim = 1 << 20;
  if (o.intermediate <= 0 || o.intermediate > kMaxDim || o.vocab < 2 || o.vocab > kMaxDim ||
      o.hidden > kMaxDim || o.layers < 1 || o.layers > 1024 || o.kv_heads > 1024 ||
      o.fc_inputs > 64 || o.target_layers < 0 || o.target_layers > 4096) {
    return Status::Usage(fmt::format(
        "example sizes out of range: --hidden/--intermediate/--vocab up to {}, --layers 1..1024",
        kMaxDim));
  }
  if (o.hidden % kHeadDim != 0 || o.hidden <= 0) {
    return Status::Usage(fmt::format("--hidden must be a positive multiple of {}", kHeadDim));
  }
  SPK_ASSIGN_OR_RETURN(DType dtype, ParseExampleDType(o.dtype));
  SPK_ASSIGN_OR_RETURN(auto layout, FamilyLayout(o, TorchDTypeName(dtype).data()));
  auto& [config, tensors] = layout;
  CheckpointWriterOptions w = CheckpointWriterOptions::For(o.dir, o.force, /*threads=*/1,
                                                           Durability::kSynced, o.shards > 1);
  w.declared_order = true;  // the layout example has always written
  CheckpointWriter writer(fs, std::move(w));
  std::mt19937_64 rng(o.seed);
  size_t per_shard = (tensors.size() + o.shards - 1) / o.shards;
  for (int s = 0; s < o.shards; ++s) {
    size_t shard = writer.AddShard(
        o.shards == 1 ? "model.safetensors"
                      : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, o.shards));
    size_t begin = std::min(tensors.size(), s * per_shard);
    size_t end = std::min(tensors.size(), begin + per_shard);
    for (size_t i = begin; i < end; ++i) {
      const ExampleTensor& e = tensors[i];
      DType d = DTypeOf(e, dtype);
      writer.AddTensors(shard, {{e.name, d, e.shape}}, ExampleTensorProducer(e, d, &rng));
    }
  }
  writer.AddFile("config.json", config.dump(2) + "\n");
  Json generation = {{"bos_token_id", 1}, {"eos_token_id", 2}, {"do_sample", false}};
  writer.AddFile("generation_config.json", generation.dump(2) + "\n");
  writer.AddFile(
      "README.md",
      fmt::format("# sparkulator example ({})\n\nRandom weights written by `sparkulator example`; "
                  "for testing the quantizer, not for generating text.\n",
                  o.family));
  return writer.Finish();
}

}  // namespace spk
