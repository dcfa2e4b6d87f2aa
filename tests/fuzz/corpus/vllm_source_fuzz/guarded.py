class S:
    def f(self, layers):
        if all(isinstance(a.qkv_proj.quant_method, UnquantizedLinearMethod) for a in
                layers):
            w = [a.qkv_proj.weight[a.q_size :] for a in layers]
        else:
            w = a.qkv_proj.weight
