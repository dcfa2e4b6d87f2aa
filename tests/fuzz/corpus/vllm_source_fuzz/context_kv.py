import torch

class M:
    def f(self, layers_attn):
        kv = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]
