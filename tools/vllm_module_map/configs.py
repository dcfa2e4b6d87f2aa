"""What the module map builds: the quantization config, the tiny configs and the method rules.

The only hand-written inputs of the maps: QUANT_CONFIG (the compressed-tensors W4A16 config every
model is built with), SCHEME_CONFIGS (one config per compressed-tensors format sparkulator writes,
each model built again under each: the map's "scheme_verdicts"), TINY (the shapes), TARGETS
(the common targets), RECIPES (per registry module: the base HF model_type and the keys that
family's code reads, optionally the target's model_type and architecture; an extra "text_config"
naming a model_type is made tiny too),
RELEASE_RECIPES / ARCH_RECIPES (a release's or an architecture's own recipe: recipe()),
MTP_OWN_CHECKPOINT (MTP drafts built from a checkpoint of their own) and the rules that name the
speculative method of a registry architecture (method_of, from vLLM's naming rules and
SpeculativeConfig.hf_config_override's source).

Error policy: pure data and functions, no vLLM import. A registry module without a recipe is not
an error here: build.Builder.draft_entry raises LookupError for it and the entry records it.
mtp_architectures raises SyntaxError on a speculative.py that does not parse.
"""
from __future__ import annotations

import ast
import re

# The maps' format: the top-level "schema_version" of every map (the C++ reader refuses a map
# without it, or with a field of another type). Raise it when a field changes type or meaning.
SCHEMA_VERSION = 3

QUANT_CONFIG = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "ignore": ["lm_head"],
    "config_groups": {"group_0": {
        "targets": ["Linear"],
        "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                    "group_size": 128, "dynamic": False, "actorder": None, "observer": "minmax"},
        "input_activations": None, "output_activations": None}},
}


def _scheme_config(fmt: str, weights: dict, input_activations: dict | None) -> dict:
    return {"quant_method": "compressed-tensors", "format": fmt, "ignore": ["lm_head"],
            "config_groups": {"group_0": {
                "targets": ["Linear"],
                "weights": {"symmetric": True, "dynamic": False, "actorder": None,
                            "observer": "minmax", **weights},
                "input_activations": input_activations, "output_activations": None}}}


# The format QUANT_CONFIG writes: the maps' "modules" are vLLM's verdict under it.
BASE_FORMAT = QUANT_CONFIG["format"]
# One representative config per compressed-tensors format that sparkulator's scheme table
# (src/quant/scheme.cc) writes, keyed by that format: the C++ reader picks a scheme's verdicts by
# its format (int-quantized: W8A8 and W4AFP8; float-quantized: FP8_DYNAMIC and FP8_BLOCK; the
# pack-quantized int rows are the base). Each is the llm-compressor preset's: W8A8 (int8 channel,
# dynamic int8 token activations), FP8_DYNAMIC, NVFP4A16, MXFP4A16, MXFP8A16.
_INT8_TOKEN = {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True,
               "symmetric": True}
_FP8_TOKEN = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True,
              "symmetric": True}
SCHEME_CONFIGS = {
    BASE_FORMAT: QUANT_CONFIG,
    "int-quantized": _scheme_config(
        "int-quantized", {"num_bits": 8, "type": "int", "strategy": "channel"}, _INT8_TOKEN),
    "float-quantized": _scheme_config(
        "float-quantized", {"num_bits": 8, "type": "float", "strategy": "channel"}, _FP8_TOKEN),
    "nvfp4-pack-quantized": _scheme_config(
        "nvfp4-pack-quantized", {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                 "group_size": 16, "scale_dtype": "torch.float8_e4m3fn"}, None),
    "mxfp4-pack-quantized": _scheme_config(
        "mxfp4-pack-quantized", {"num_bits": 4, "type": "float", "strategy": "group",
                                 "group_size": 32, "scale_dtype": "torch.uint8"}, None),
    "mxfp8-quantized": _scheme_config(
        "mxfp8-quantized", {"num_bits": 8, "type": "float", "strategy": "group",
                            "group_size": 32, "scale_dtype": "torch.uint8"}, None),
}

# Shapes small enough to build fast and large enough for the W4A16 kernels' shape rules
# (in % 128 == 0, out % 64 == 0). Only keys the base config class already has are set.
TINY = {
    "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 512,
    "max_position_embeddings": 512, "moe_intermediate_size": 256, "num_experts": 4,
    "n_routed_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "shared_expert_intermediate_size": 256, "first_k_dense_replace": 1,
    "kv_lora_rank": 128, "q_lora_rank": 128, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "n_group": 1, "topk_group": 1, "num_nextn_predict_layers": 1,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
    "linear_value_head_dim": 64, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "tie_word_embeddings": False,
}
TARGET_LAYERS = 2

# Common targets: architecture -> HF model_type.
TARGETS = {"Qwen3ForCausalLM": "qwen3", "LlamaForCausalLM": "llama",
           "Qwen3MoeForCausalLM": "qwen3_moe"}

# Registry module name (last part) -> the method that loads it; MTP is found separately.
METHOD_OF = [
    (r"eagle3", "eagle3"), (r"eagle", "eagle"), (r"dflash|lilicorr|xpress|beam", "dflash"),
    (r"dspark", "dspark"), (r"^extract_hidden_states$", "extract_hidden_states"),
    (r"^medusa$", "medusa"), (r"mtp|^(deepseek_v32|dots3_note|deepseek_v4|deepseek_v41|minimax_m3|"
                              r"inkling|glm5next|qwen4_exp|interns2_mobius)$", "mtp"),
]

# Recipe keys that are not config.json keys (recipe_options): the architecture the draft's
# config.json names where vLLM reaches the registry's only from another (hf_config_override
# rewrites it), ignore entries the quantization config needs where vLLM refuses the plain
# one (the entry records that refusal), and the target config's own extra keys.
CHECKPOINT_ARCH = "_checkpoint_architecture"
QUANT_IGNORE = "_quant_ignore"
# Extra keys of the target's config.json, for a draft that reads the target's config
# (DeepSeek-V4 DSpark: "reuses the full target config").
TARGET_EXTRA = "_target_extra"


def recipe_options(extra: dict) -> tuple[dict, dict]:
    """A recipe's extra keys split into (config.json keys, recipe options)."""
    opts = {k: v for k, v in extra.items() if k in (CHECKPOINT_ARCH, QUANT_IGNORE, TARGET_EXTRA)}
    return {k: v for k, v in extra.items() if k not in opts}, opts


# Registry module name (last part, or the full name where last parts collide) -> HF model_type
# of the tiny config, and extra keys.
DFLASH = {"dflash_config": {"target_layer_ids": [0, 1], "mask_token_id": 3, "block_size": 4},
          "block_size": 4, "num_target_layers": TARGET_LAYERS}
# DFlash2 (qwen3_dflash2.py) and LiLiCorr (lilicorr.py) read these dflash_config keys.
DFLASH2 = {**DFLASH, "dflash_config": {**DFLASH["dflash_config"], "conv_kernel_size": 4,
                                        "conv_group_size": 64, "selector_rank": 64,
                                        "selector_top_k": 8}}
LILICORR = {**DFLASH, "dflash_config": {**DFLASH["dflash_config"], "lilicorr_hidden_size": 256,
                                         "lilicorr_candidate_topk": 8, "lilicorr_num_heads": 4,
                                         "lilicorr_mlp_ratio": 2, "lilicorr_factor_dim": 64,
                                         "lilicorr_vector_eps": 1e-6, "lilicorr_logit_scale": 1.0,
                                         "lilicorr_num_layers": 1}}
# The Beam DFlash2 draft (models/beam/nvidia/dflash2.py) asserts every layer is non-causal
# sliding-window attention and reads a final_logit_softcapping from dflash_config.
BEAM = {**DFLASH2, "dflash_config": {**DFLASH2["dflash_config"], "final_logit_softcapping": 30.0},
        "layer_types": ["sliding_attention"], "is_causal": False, "sliding_window": 64}
# The dense Muse Spark DSpark draft (models/muse_spark/common/dspark.py) reads these top-level
# keys of its own config class (muse_spark_dspark); moe disabled: the draft layers are dense.
MUSE_DSPARK = {"target_hidden_size": 256, "target_layer_ids": [0, 1], "mask_token_id": 3,
               "markov_rank": 64, "enable_confidence_head": True,
               "confidence_head_with_markov": False, "ffn_dim_multiplier": 2.0,
               "moe": {"is_enabled": False}, "num_target_layers": TARGET_LAYERS}
# Gemma4's MTP draft is its own checkpoint (MTP_OWN_CHECKPOINT), a gemma4_assistant: a text
# model its config class requires without per-layer inputs, MoE block or double-wide MLP, and
# the projections to and from the target's (backbone's) width.
GEMMA4_ASSISTANT = ("gemma4_assistant",
                    {"backbone_hidden_size": 256,
                     "text_config": {"model_type": "gemma4_text", "hidden_size_per_layer_input": 0,
                                     "vocab_size_per_layer_input": 0, "enable_moe_block": False,
                                     "use_double_wide_mlp": False}},
                    ("gemma4_text", "Gemma4ForCausalLM"))
EAGLE3 = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1],
                           "use_aux_hidden_state": True}, "draft_vocab_size": 512}
DSV3 = ("deepseek_v3", "DeepseekV3ForCausalLM")
# An MTP layer after the target's layers is a MoE layer with the tiny config; vLLM 0.32's CPU
# build has no W4A16 MoE kernel, so these keep it dense (first_k_dense_replace past it).
DENSE_MTP = {"first_k_dense_replace": 8}
MLA = {"kv_lora_rank": 128, "q_lora_rank": 128, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
       "v_head_dim": 128}
# DeepSeek-V4's attention output projection wo_a takes n_heads * head_dim / o_groups inputs: 2
# groups keep that a whole W4A16 group (the real model's 64 * 512 / 8).
DSV4 = {**DENSE_MTP, "o_groups": 2, "o_lora_rank": 128}
# Step5 refuses checkpoints without a sparse_config; its DSA attention takes head_dim 192 (bf16),
# 4/8/16 query heads per KV group, one indexer provider group per KV group and a head-wise
# attention gate.
# Its qkv_indexer_proj (q/k/v and the sparse indexer's shards in one GEMM) refuses a quant method:
# the quantization config must ignore it (the entry records vLLM's refusal of the plain config).
STEP5 = ("step5", {"num_attention_heads": 8, "num_attention_groups": 2, "head_dim": 192,
                   "num_nextn_predict_layers": 1, "use_head_wise_attn_gate": True,
                   "sparse_config": {"enabled": True, "index_tp_size": 2,
                                     "sparse_indexer_num_heads": 8},
                   QUANT_IGNORE: ["re:.*\\.qkv_indexer_proj$",
                                  "re:.*self_attn\\.(q_proj|k_proj|v_proj|g_proj)$",
                                  "re:.*self_attn\\.sparse_indexer_[qkz]$"]},
         ("step5", "Step5ForCausalLM"))
# EXAONE 4.5 and GLM-OCR are vision-language checkpoints: hf_config_override makes their MTP
# from the ForConditionalGeneration config (its text_config made tiny); EXAONE 4.5's MTP reads
# vocab_size and num_nextn_predict_layers at the top level, GLM-OCR's in text_config.
EXAONE4_5 = ("exaone4_5", {"vocab_size": TINY["vocab_size"], "num_nextn_predict_layers": 1,
                           "text_config": {"model_type": "exaone4"}},
             ("exaone4_5", "Exaone4_5_ForConditionalGeneration"))
GLM_OCR = ("glm_ocr", {"text_config": {"model_type": "glm_ocr_text",
                                       "num_nextn_predict_layers": 1}},
           ("glm_ocr", "GlmOcrForConditionalGeneration"))
# MiMo-V2's MTP layer is a sliding-window layer: its SWA heads and window (mimo_v2_mtp.py).
MIMO_V2 = {"layernorm_epsilon": 1e-6, "swa_num_attention_heads": 4, "swa_num_key_value_heads": 2,
           "swa_head_dim": 64, "sliding_window_size": 128, "attention_bias": False}
RECIPES = {
    "llama_eagle": ("llama", {}),
    "llama_eagle3": ("llama", EAGLE3),
    "qwen3_eagle3": ("qwen3", EAGLE3),
    # EagleLlama4's validate_and_update_config asserts no YOCO KV sharing and no MoE layers
    # (a dense draft: interleave_moe_layer_step 0); it reads the target's Llama-4 config.
    "llama4_eagle": ("llama4_text", {"yoco_global_kv_layer": None, "yoco_local_kv_layer": None,
                                     "moe_layers": [], "interleave_moe_layer_step": 0,
                                     "draft_vocab_size": 512},
                     ("llama4_text", "Llama4ForCausalLM")),
    "minicpm_eagle": ("llama", {"scale_emb": 1, "dim_model_base": 256, "scale_depth": 1.4}),
    "cohere_eagle": ("cohere2", {}),
    "mistral_eagle": ("mistral", {}),
    "mistral_large_3_eagle": ("deepseek_v3", DENSE_MTP, DSV3),
    "deepseek_eagle3": ("llama", {**EAGLE3, **MLA}, DSV3),
    "deepseek_eagle": ("deepseek_v3", DENSE_MTP, DSV3),
    "qwen3_dflash": ("qwen3", DFLASH),
    "qwen3_dflash2": ("qwen3", DFLASH2),
    "laguna_dflash": ("laguna", {**DFLASH, "draft_vocab_size": 512}),
    "lilicorr": ("qwen3", LILICORR),
    "qwen3_xpress": ("qwen3", DFLASH),
    "beam": ("qwen3", BEAM),
    "qwen3_dspark": ("qwen3", {**DFLASH, "markov_rank": 64}),
    "deepseek_mtp": ("deepseek_v3", DENSE_MTP),
    "deepseek_v32": ("deepseek_v32", DENSE_MTP),
    "deepseek_v4": ("deepseek_v4", DSV4),
    "deepseek_v41": ("deepseek_v4", DSV4),
    "dots3_note": ("dots3_note", DENSE_MTP),
    # Kimi-K3 and GLM-5-Next keep the text model (and its MTP layer count) under text_config.
    # Kimi-K3's MLA is NoPE-only (mla_use_nope); GLM-5-Next's attention takes as many KV heads
    # as query heads.
    "kimi_k3": ("kimi_k3", {**DENSE_MTP, "text_config": {"model_type": "kimi_linear",
                                                         **DENSE_MTP, "mla_use_nope": True,
                                                         "num_nextn_predict_layers": 1}}),
    "glm5next": ("glm5_next", {"text_config": {"model_type": "glm5_next_text", **DENSE_MTP,
                                               "num_key_value_heads": 4,
                                               "num_nextn_predict_layers": 1}}),
    "exaone4_5_mtp": EXAONE4_5,
    "glm_ocr_mtp": GLM_OCR,
    "hy_v3_mtp": ("hy_v3", {**DENSE_MTP, "num_nextn_predict_layers": 1}),
    "mimo_v2_mtp": ("mimo_v2_flash", MIMO_V2),
    "qwen4_exp": ("qwen4_exp_text", {}),
    # Its fused context-KV precompute (_build_fused_kv_buffers: 0.32 and 0.33 call it from
    # load_weights, 0.34 from process_weights_after_loading) asserts that every draft layer (one
    # here) is a full-attention attention_k_eq_v layer: K and V from k_proj, no v_proj.
    "gemma4_dspark": ("gemma4_text", {**DFLASH, "target_layer_ids": [0, 1], "markov_rank": 64,
                                      "attention_k_eq_v": True,
                                      "layer_types": ["full_attention"]}),
    "glm4_moe_mtp": ("glm4_moe", {"head_dim": 64}),
    "glm4_moe_lite_mtp": ("glm4_moe_lite", {"first_k_dense_replace": 1,
                                             "num_nextn_predict_layers": 1}),
    "qwen3_next_mtp": ("qwen3_next", {}),
    "qwen3_5_mtp": ("qwen3_5_text", {}),  # 0.34 moved it to vllm.models.qwen3_5 (ARCH_RECIPES)
    "ernie_mtp": ("ernie4_5_moe", {"num_nextn_predict_layers": 1}),
    "mimo_mtp": ("qwen2", {"num_nextn_predict_layers": 1}, ("qwen2", "MiMoForCausalLM")),
    "longcat_flash_mtp": ("longcat_flash", {"mla_scale_q_lora": True, "mla_scale_kv_lora": True}),
    "openpangu_mtp": ("pangu_ultra_moe", {}),
    "exaone_moe_mtp": ("exaone_moe", {}),
    "step3p5_mtp": ("step3p5", {"num_attention_groups": 2}),
    "step5": STEP5,
    "gemma4_mtp": GEMMA4_ASSISTANT,
    "nemotron_h_mtp": ("nemotron_h", {"moe_shared_expert_intermediate_size": 256}),
    "extract_hidden_states": ("qwen3", {}),
    "medusa": ("medusa", {}),
    "vllm.models.muse_spark.common.dspark": ("muse_spark_dspark", MUSE_DSPARK),
    # Kimi-K3's dense MLA DSpark draft (k3_dspark): its config class requires target_layer_ids
    # with a matching num_target_layers and a q_lora_rank; its MLA attention takes the target's
    # MLA sizes (an MLA target: DeepSeek-V3's layout).
    "dspark_mla": ("k3_dspark", {**DFLASH, **MLA, "target_layer_ids": [0, 1],
                                 "target_hidden_size": 256, "markov_rank": 64}, DSV3),
}

# Registry modules whose MTP draft ships as a checkpoint of its own (SpeculativeConfig model= the
# draft, method "mtp"; vLLM detects it from the model_type hf_config_override gives it), not as
# layers of the target's: Gemma4's assistant (gemma4_assistant -> gemma4_mtp).
MTP_OWN_CHECKPOINT = {"gemma4_mtp"}

# A release's own recipe where its code needs another config than RECIPES' ("major.minor").
RELEASE_RECIPES = {
    # Step-3.5's 3:1 sliding/global schedule puts the MTP layer after 2 target layers on a
    # sliding layer (layer_types padded with the MTP layers, as its checkpoints ship them).
    # 0.33 reads a global MTP layer's heads from per_layer_config, which transformers' config
    # always makes and which ends at the target's layers (IndexError); 0.32's own config class
    # cuts layer_types to the target's layers and then indexes the MTP layer in it, so 0.32
    # builds only without layer_types (RECIPES').
    "0.33": {"step3p5_mtp": ("step3p5", {"num_attention_groups": 2, "sliding_window": 128,
                                         "layer_types": ["full_attention", "sliding_attention",
                                                         "sliding_attention"]}),
             # Kimi-K3 (0.33 on: CUDA faked, so a W4A16 MoE kernel exists) with its MTP layer a
             # MoE layer, as in the real model (first_k_dense_replace at or below the MTP
             # layer's index, the target's layer count): with no routed experts its
             # load_weights renames every .weight_packed to .weight and drops it. Its config
             # names the routed experts per token num_experts_per_token (TINY's key is another).
             "kimi_k3": ("kimi_k3", {"text_config": {
                 **RECIPES["kimi_k3"][1]["text_config"],
                 "first_k_dense_replace": TINY["first_k_dense_replace"],
                 "num_experts_per_token": TINY["num_experts_per_tok"],
                 "num_shared_experts": TINY["n_shared_experts"]}})},
}


# Registry modules no tiny config can reach here, and why (the entry records it).
NO_RECIPE = {
    "bailing_moe_mtp": "its target's config (model_type bailing_hybrid, BailingMoeV2_5ForCausalLM) "
                       "is the checkpoint's remote code: neither vLLM nor transformers registers "
                       "a config class for it",
    "mistral_large4": "Mistral Large 4's DSpark draft is reached only from a Mistral-format "
                      "checkpoint (params.json, whose mtp.dspark block "
                      "transformers_utils/configs/mistral.py turns into model_type "
                      "mistral_large_4), which no config.json of the generator writes; "
                      "vLLM builds it with quantization_config None (all dense) from the "
                      "target checkpoint's mtp_dspark.* weights",
    "nemotron_parse3_5_mtp": "its target (RadioMBartPrefixForCausalLM) takes the checkpoint's "
                             "remote-code config: neither vLLM nor transformers registers a config "
                             "class for Nemotron Parse 3.5",
}

# An architecture's own recipe where its registry module holds several (one tiny config cannot
# resolve to each of them).
# The DSpark draft's layers take the target's layer types; a compressed type builds a
# DeepseekCompressor, which allocates on device "cuda" whatever the default device (CPU torch
# cannot): no compressed types here, so its attention Linears are recorded without the
# compressor's.
DSV4_DSPARK = {**DSV4, "dspark_target_layer_ids": [0, 1], "dspark_markov_rank": 64,
               "compress_rates": {}}
DSV41_DSPARK = {"text_config": {"model_type": "deepseek_v4", **DSV4_DSPARK,
                                "mlp_layer_types": None}}
ARCH_RECIPES = {
    "Qwen3_5MoeMTP": ("qwen3_5_moe_text", {}),
    # Keyed by architecture: 0.34 moved it (and its MoE sibling) from qwen3_5_mtp to the
    # vllm.models.qwen3_5 package, whose last name part is also the target's.
    "Qwen3_5MTP": ("qwen3_5_text", {}),
    # Bailing-MoE V3's MTP is reached from its VL checkpoint (hf_config_override promotes the
    # text_config, whose class, bailing_hybrid, is registered only as the VL config's part).
    "BailingMoeV3MTPModel": ("bailing_moe_v3_vl",
                             {"text_config": {**TINY, "num_hidden_layers": TARGET_LAYERS,
                                              "num_nextn_predict_layers": 1}},
                             ("bailing_moe_v3_vl", "BailingMoeV3VLForConditionalGeneration")),
    # DeepSeek-V4(.1) DSpark (models/deepseek_v4/nvidia/dspark.py): SpeculativeConfig rewrites a
    # dspark draft of a deepseek_v4 / deepseek_v41 target to DSparkDraftModel / DSparkV41DraftModel
    # (by the target's model_type); the draft reads the target layers it taps.
    "DSparkDraftModel": ("deepseek_v4", {**DSV4_DSPARK, TARGET_EXTRA: DSV4_DSPARK},
                         ("deepseek_v4", "DeepseekV4ForCausalLM")),
    # V4.1's config nests the text model under text_config (flattened by its config class, which
    # takes only sparse/dense MLP layer types: none given, its default).
    "DSparkV41DraftModel": ("deepseek_v41", {**DSV41_DSPARK, TARGET_EXTRA: DSV41_DSPARK},
                            ("deepseek_v41", "DeepseekV41ForCausalLM")),
    # MiniMax-M3's DSpark draft (models/minimax_m3/common/dspark.py, 0.34) is a standalone
    # checkpoint of the text config; hf_config_override reads dspark_markov_rank, the decoder
    # layer refuses all but a dense FFN (dspark_use_dense_ffn) of dspark_ffn_hidden_size.
    "DSparkMiniMaxDraftModel": ("minimax_m3_vl_text",
                                {**DFLASH, "dspark_use_dense_ffn": True,
                                 "dspark_ffn_hidden_size": 512, "dspark_markov_rank": 64}),
    # Nemotron 3.5 Transcribe (0.34): its MTP head (Nemotron3_5TranscribeMTP, a NemotronHMTP)
    # sits in the speech model's checkpoint (model_type nemo_speechlm, the decoder under
    # text_config); hf_config_override promotes text_config and copies the speech model's
    # quantization_config onto it, so the head is quantized with the target's config.
    "Nemotron3_5TranscribeMTPModel": (
        "nemo_speechlm", {"text_config": {"model_type": "nemotron_h",
                                          "moe_shared_expert_intermediate_size": 256}},
        ("nemo_speechlm", "Nemotron3_5TranscribeForConditionalGeneration")),
    "MiMoV2OmniMTPModel": ("mimo_v2_flash", MIMO_V2, ("mimo_v2_flash", "MiMoV2OmniForCausalLM")),
    # hf_config_override names an EAGLE draft EagleMistralLarge3ForCausalLM only when its
    # checkpoint says MistralLarge3ForCausalLM (a DeepSeek-V3 layout).
    "EagleMistralLarge3ForCausalLM": ("deepseek_v3", {**DENSE_MTP, CHECKPOINT_ARCH:
                                                      "MistralLarge3ForCausalLM"}, DSV3),
}


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:2])


def recipe(arch: str, module: str, version: str) -> tuple | None:
    """The recipe of `arch` (registry module `module`, or its last name part) for vLLM
    `version`: the newest release's recipe at or before `version` (a release's recipe holds
    until a later release gives another: 0.34's Step-3.5 code is 0.33's), else the
    architecture's, else the module's (its full name first: two packages' modules may share
    the last part, as Muse Spark's and MiniMax-M3's `dspark`); None without one."""
    last = module.split(".")[-1]
    for minor in sorted((m for m in RELEASE_RECIPES if _minor(m) <= _minor(version)),
                        key=_minor, reverse=True):
        if last in RELEASE_RECIPES[minor]:
            return RELEASE_RECIPES[minor][last]
    return ARCH_RECIPES.get(arch) or RECIPES.get(module) or RECIPES.get(last)


def inherited_recipe(cls, version: str) -> tuple[tuple, str] | None:
    """(recipe, base class name) of the first base class of `cls` (a registry class without
    a recipe) whose module has one: a kind that subclasses a known one (0.34's
    RicursiveDFlash2ForCausalLM of DFlash2Qwen3ForCausalLM) needs no recipe of its own."""
    for base in cls.__mro__[1:]:
        module = getattr(base, "__module__", "") or ""
        if not module.startswith("vllm."):
            continue
        found = recipe("", module, version)
        if found is not None:
            return found, base.__name__
    return None


MODEL_DIRS = ("vllm/model_executor/models/", "vllm/models/")


def _architectures_written(node) -> list[str]:
    """The strings of every {"architectures": [...]} literal under `node`."""
    return [e.value for sub in ast.walk(node) if isinstance(sub, ast.Dict)
            for k, v in zip(sub.keys, sub.values)
            if isinstance(k, ast.Constant) and k.value == "architectures" and
            isinstance(v, ast.List)
            for e in v.elts if isinstance(e, ast.Constant)]


def mtp_architectures(speculative_py: str) -> set[str]:
    """The architectures SpeculativeConfig.hf_config_override writes (its source, parsed)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(speculative_py)):
        if isinstance(node, ast.FunctionDef) and node.name == "hf_config_override":
            found |= set(_architectures_written(node))
            found |= {sub.value for d in ast.walk(node) if isinstance(d, ast.Dict)
                      for sub in d.values if isinstance(sub, ast.Constant) and
                      isinstance(sub.value, str) and "MTP" in sub.value}
    return found


def _compared_strings(test, attr: str) -> list[str]:
    """The strings an `if` test compares `<x>.<attr>` (or `<x>.<attr>[i]`) with (`in (...)`,
    `== "..."`), through `or`/`and`."""
    out: list[str] = []
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        left = cmp.left.value if isinstance(cmp.left, ast.Subscript) else cmp.left
        if isinstance(left, ast.Attribute) and left.attr == attr:
            for values in cmp.comparators:
                out += [e.value for e in getattr(values, "elts", [values])
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return out


def override_sources(speculative_py: str) -> dict[str, dict[str, list[str]]]:
    """architecture -> what hf_config_override rewrites to it: {"model_types": the checkpoint
    model_types, "architectures": the checkpoint architectures} that an `if` whose body writes
    {"architectures": [that architecture]} tests for (`hf_config.model_type in (...)`,
    `hf_config.architectures[0] in (...)`). A draft that ships as its own checkpoint (Gemma4's
    assistant: gemma4_assistant -> Gemma4MTPModel) is found by these model_types, not by its
    config's architectures (Gemma4AssistantForCausalLM, which no registry lists); an MTP layer
    in a target's checkpoint by these architectures where transformers has no causal-LM class
    for the model_type (Step3p5ForCausalLM -> Step3p5MTP)."""
    found: dict[str, dict[str, set[str]]] = {}
    for node in ast.walk(ast.parse(speculative_py)):
        if not isinstance(node, ast.If):
            continue
        types = _compared_strings(node.test, "model_type")
        archs = _compared_strings(node.test, "architectures")
        if not types and not archs:
            continue
        for arch in _architectures_written(ast.Module(body=node.body, type_ignores=[])):
            rule = found.setdefault(arch, {"model_types": set(), "architectures": set()})
            rule["model_types"].update(types)
            rule["architectures"].update(archs)
    return {arch: {k: sorted(v) for k, v in rule.items()} for arch, rule in found.items()}


def derive_recipe(cls, arch: str, version: str, renamed: dict | None,
                  rewritten: dict) -> tuple[tuple, dict]:
    """The recipe of a draft `arch` (registry class `cls`) with none of its own: its first
    base class's (inherited_recipe); the draft config named as hf_config_override's
    initial_architecture test asks (`renamed`, renamed_from(): the architecture it renames,
    each key it tests set by tested_key_value); for an MTP layer whose checkpoint architecture
    hf_config_override tests (`rewritten`, override_sources()), that target. Returns (recipe,
    what was derived: the map's built.recipe_derived); LookupError without a base recipe."""
    found = inherited_recipe(cls, version)
    if found is None:
        raise LookupError(f"no tiny-config recipe for registry module {cls.__module__!r} "
                          f"nor for a base class of {cls.__name__}")
    (model_type, extra, *tgt), base = found
    derived: dict = {"base_class": base}
    if rewritten.get("architectures"):
        types = rewritten.get("model_types") or [model_type]
        model_type, tgt = types[0], [(types[0], rewritten["architectures"][0])]
        derived["target_from_hf_config_override"] = tgt[0][1]
    if renamed:
        extra = {**extra, CHECKPOINT_ARCH: renamed["architectures"][0],
                 **{k: tested_key_value(k, 1) for k in renamed["keys"]}}
        derived["hf_config_override"] = renamed
    return (model_type, extra, *tgt), derived


def renamed_from(speculative_py: str) -> dict[str, dict[str, list[str]]]:
    """architecture -> {"architectures": the draft config's architecture, "keys": config keys
    it must hold}, from each `if` of hf_config_override that tests `initial_architecture ==
    "<name>"` (and `getattr(hf_config, "<key>", ...)`) and writes {"architectures": [that
    architecture]} (0.34: a DFlash2DraftModel config with no_rope_layers becomes
    DFlash2RicursiveDraftModel). A draft without a recipe of its own is written that way."""
    found: dict[str, dict[str, list[str]]] = {}
    for node in ast.walk(ast.parse(speculative_py)):
        if not isinstance(node, ast.If):
            continue
        archs = [c.value for cmp in ast.walk(node.test) if isinstance(cmp, ast.Compare)
                 and isinstance(cmp.left, ast.Name) and cmp.left.id == "initial_architecture"
                 for c in cmp.comparators if isinstance(c, ast.Constant)
                 and isinstance(c.value, str)]
        keys = [call.args[1].value for call in ast.walk(node.test)
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "getattr" and len(call.args) >= 2
                and isinstance(call.args[1], ast.Constant)]
        if not archs:
            continue
        for arch in _architectures_written(ast.Module(body=node.body, type_ignores=[])):
            found.setdefault(arch, {"architectures": archs, "keys": keys})
    return found


def tested_key_value(key: str, layers: int):
    """The value a derived draft config gives a key hf_config_override tests for truthiness:
    the draft's layer ids for a `*_layers` key (no_rope_layers: which layers are NoPE), else
    True."""
    return list(range(layers)) if key.endswith("_layers") else True


def method_of(arch: str, module: str, mtp_archs: set[str]) -> tuple[str, str]:
    if "DSpark" in arch:
        return "dspark", "architecture name contains DSpark"
    # EAGLEConfig (transformers_utils/configs/eagle.py) names the draft Eagle3<arch> for eagle3
    # and Eagle<arch> for eagle; hf_config_override also writes some Eagle* names.
    if arch.startswith("Eagle3") or arch.endswith("Eagle3"):
        return "eagle3", "EAGLEConfig's eagle3 naming (Eagle3<arch> / <arch>Eagle3)"
    if arch.startswith("Eagle"):
        return "eagle", "EAGLEConfig's eagle naming (Eagle<arch>)"
    if arch in mtp_archs:
        return "mtp", "speculative.py hf_config_override writes this architecture"
    if re.search(r"MTP(Model)?$|_MTP$", arch):
        return "mtp", "architecture name ends in MTP"
    last = module.split(".")[-1]
    for pattern, method in METHOD_OF:
        if re.search(pattern, last):
            return method, f"registry module {last!r} matches {pattern!r}"
    return "unknown", "no rule"

