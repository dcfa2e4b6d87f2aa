// `sparkulator example`: writes a small, complete Hugging Face checkpoint shaped like a draft
// family (DFlash, EAGLE-3) or a plain Qwen3-style LLM, with random weights of realistic scale and a
// few outlier columns, so that the quantizer, inspect and the tests have a real input on a fresh
// machine. The EAGLE-3 head has vLLM's Eagle3Qwen3ForCausalLM layout (qwen3_eagle3.py: one decoder
// layer whose q/k/v take [embeds, hidden], hidden_norm, fc over three target hidden states, d2t)
// and names its aux layers in eagle_config, so vLLM serves it on a target of that many layers;
// eagle3-speculators writes the same tensors with a speculators-format config (the
// transformer_layer_config path of quantize).
//
// Deterministic: the same family, seed and size give the same bytes. Written through
// CheckpointWriter (safetensors/checkpoint_writer.h), tensors in declaration order: atomically
// (temporary folder, then rename), fsynced, and nothing left behind on failure.
// Errors: Usage for an unknown family, AlreadyExists/IoError from the output.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "io/file.h"

namespace spk {

struct ExampleOptions {
  std::string family = "dflash";  // dflash | eagle3 | eagle3-speculators | llm
  std::string dir;
  int shards = 1;  // >1 writes model-0000K-of-0000N.safetensors and an index
  int64_t hidden = 256;
  int64_t intermediate = 768;
  int layers = 2;
  int64_t kv_heads = 0;   // key/value heads of 64 dims; 0: half the attention heads
  int64_t fc_inputs = 0;  // DFlash: target layers fed to fc (fc is hidden x fc_inputs*hidden); 0: 3
  // Layers of the target the draft is for: DFlash num_target_layers (0: max(8, 2 * fc_inputs + 2));
  // EAGLE-3 the target whose hidden states after three distinct layers feed fc (0: 8).
  int64_t target_layers = 0;
  int64_t vocab = 1024;
  uint64_t seed = 1;
  std::string dtype = "BF16";  // BF16, F16 or F32
  bool force = false;
};

Status WriteExampleCheckpoint(const ExampleOptions& options, FileSystem* fs);

}  // namespace spk
