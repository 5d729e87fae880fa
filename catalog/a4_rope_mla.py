"""Catalog of assignment 4 (rotary position embedding and multi-head latent attention): correct answers and
realistic mistakes.

`LECTURER` is the lecturer's own d2l-zh style code (seed comment style, `torch.bmm` and loops over heads where the
reference uses einsum and reshapes). `ALSO_CORRECT["deck"]` is the code the unit-4 deck teaches, read from
`notebooks/04_rope_mla.ipynb` when the catalog is loaded; `ALSO_CORRECT["hf_style"]` is written the way Hugging Face
transformers writes DeepSeek-V2 attention (`rotate_half`, 4-D head layout, its own eager attention with a float32
softmax). Cells an answer does not cover keep the source solution. Each variant lists the exact test cells that
must lose points (no cascade between questions).
"""

from attncourse.grading.deck_code import deck_definitions

NOTEBOOK = "rope_mla"

# ---------------------------------------------------------------------------------------------------------------
# the lecturer's code

LECTURER = {
    "apply_rope": '''#@save
def rotate_half(X):
    """把后一半取负放到前面：(x1, x2) -> (-x2, x1)"""
    X1, X2 = X.chunk(2, dim=-1)
    return torch.cat((-X2, X1), dim=-1)


#@save
def apply_rope(X, positions, base=10000):
    """旋转位置编码"""
    # X的形状:(…，序列长度，d)，positions的形状:(序列长度，)
    d = X.shape[-1]
    # 频率θ_i=base^(-2i/d)，在float32中计算
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32,
                                            device=X.device) / d))
    # angles的形状:(序列长度，d/2)
    angles = torch.outer(positions.float().to(X.device), inv_freq)
    emb = torch.cat((angles, angles), dim=-1)
    return (X * emb.cos().to(X.dtype)
            + rotate_half(X) * emb.sin().to(X.dtype))''',

    "mla_cache_bytes": '''#@save
def mla_cache_bytes(num_layers, kv_lora_rank, qk_rope_head_dim, num_tokens,
                    batch_size=1, bytes_per_element=2):
    """MLA缓存的字节数"""
    # 每层、每个词元缓存潜向量(d_c)与共用的旋转键(d_h^R)
    num_elements = (kv_lora_rank + qk_rope_head_dim) * num_layers
    return num_elements * num_tokens * batch_size * bytes_per_element''',

    "gqa_equivalent_groups": '''#@save
def gqa_equivalent_groups(kv_lora_rank, qk_rope_head_dim, head_dim):
    """缓存同样大小的GQA的组数"""
    # GQA每组每个词元缓存键和值各head_dim个元素
    return (kv_lora_rank + qk_rope_head_dim) / (2 * head_dim)''',

    "multi_head_latent_attention": '''#@save
class MultiHeadLatentAttention(nn.Module):
    """多头潜在注意力"""
    def __init__(self, num_hiddens, num_heads, kv_lora_rank,
                 qk_rope_head_dim, dropout, head_size=None, **kwargs):
        super(MultiHeadLatentAttention, self).__init__(**kwargs)
        self.num_heads = num_heads
        self.attention = d2l.DotProductAttention(dropout)
        if head_size is None:
            head_size = num_hiddens // num_heads
        self.W_q = nn.Linear(num_hiddens, num_heads * head_size, bias=False)
        self.W_qr = nn.Linear(num_hiddens, num_heads * qk_rope_head_dim,
                              bias=False)
        self.W_dkv = nn.Linear(num_hiddens, kv_lora_rank, bias=False)
        self.W_uk = nn.Linear(kv_lora_rank, num_heads * head_size, bias=False)
        self.W_uv = nn.Linear(kv_lora_rank, num_heads * head_size, bias=False)
        self.W_kr = nn.Linear(num_hiddens, qk_rope_head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * head_size, num_hiddens, bias=False)

    def forward(self, X, valid_lens):
        positions = torch.arange(X.shape[1], device=X.device)
        # c_kv的形状:(batch_size，序列长度，kv_lora_rank)
        c_kv = self.W_dkv(X)
        # 查询的两部分:(batch_size*num_heads，序列长度，head_size)和(…，qk_rope_head_dim)
        q_nope = transpose_qkv(self.W_q(X), self.num_heads)
        q_pe = apply_rope(transpose_qkv(self.W_qr(X), self.num_heads), positions)
        k_nope = transpose_qkv(self.W_uk(c_kv), self.num_heads)
        # 旋转键只有一个，复制给每个头
        k_pe = repeat_kv(apply_rope(self.W_kr(X), positions), self.num_heads)
        queries = torch.cat((q_nope, q_pe), dim=-1)
        keys = torch.cat((k_nope, k_pe), dim=-1)
        values = transpose_qkv(self.W_uv(c_kv), self.num_heads)
        if valid_lens is not None:
            # 在轴0，将每一项复制num_heads次
            valid_lens = torch.repeat_interleave(
                valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        output_concat = transpose_output(output, self.num_heads)
        return self.W_o(output_concat)''',

    "latent_cache": '''#@save
class LatentCache:
    """MLA的缓存：潜向量与旋转键"""
    def __init__(self):
        self.latents, self.rope_keys = None, None

    def append(self, latents, rope_keys):
        # latents的形状:(batch_size，新词元的个数，kv_lora_rank)
        # rope_keys的形状:(batch_size，新词元的个数，qk_rope_head_dim)，已旋转
        if self.latents is None:
            self.latents, self.rope_keys = latents, rope_keys
        else:
            self.latents = torch.cat((self.latents, latents), dim=1)
            self.rope_keys = torch.cat((self.rope_keys, rope_keys), dim=1)
        return self.latents, self.rope_keys''',

    "mla_decode_step": '''#@save
def mla_decode_step(mla, x, cache):
    """MLA解码一步"""
    # x的形状:(batch_size，新词元的个数，num_hiddens)
    num_past = 0 if cache.latents is None else cache.latents.shape[1]
    num_new = x.shape[1]
    positions = torch.arange(num_past, num_past + num_new, device=x.device)
    q_nope = transpose_qkv(mla.W_q(x), mla.num_heads)
    q_pe = apply_rope(transpose_qkv(mla.W_qr(x), mla.num_heads), positions)
    c_kv, k_pe = cache.append(mla.W_dkv(x), apply_rope(mla.W_kr(x), positions))
    keys = torch.cat((transpose_qkv(mla.W_uk(c_kv), mla.num_heads),
                      repeat_kv(k_pe, mla.num_heads)), dim=-1)
    values = transpose_qkv(mla.W_uv(c_kv), mla.num_heads)
    # 第j个新词元能看到前num_past+j+1个词元
    valid_lens = torch.arange(num_past + 1, num_past + num_new + 1,
                              device=x.device).repeat(x.shape[0] * mla.num_heads, 1)
    output = mla.attention(torch.cat((q_nope, q_pe), dim=-1), keys, values,
                           valid_lens)
    return mla.W_o(transpose_output(output, mla.num_heads))''',

    "absorbed_decode_step": '''#@save
def absorbed_decode_step(mla, x, cache):
    """吸收权重之后的MLA解码一步"""
    batch_size, num_heads = x.shape[0], mla.num_heads
    num_past = 0 if cache.latents is None else cache.latents.shape[1]
    positions = torch.arange(num_past, num_past + 1, device=x.device)
    kv_lora_rank = mla.W_uk.weight.shape[1]
    head_size = mla.W_uk.weight.shape[0] // num_heads
    # W_uk，W_uv的形状:(num_heads，head_size，kv_lora_rank)
    W_uk = mla.W_uk.weight.reshape(num_heads, head_size, kv_lora_rank)
    W_uv = mla.W_uv.weight.reshape(num_heads, head_size, kv_lora_rank)
    # q_nope的形状:(num_heads，batch_size，head_size)
    q_nope = mla.W_q(x).reshape(batch_size, num_heads, head_size).transpose(0, 1)
    q_pe = apply_rope(transpose_qkv(mla.W_qr(x), num_heads), positions)
    c_kv, k_pe = cache.append(mla.W_dkv(x), apply_rope(mla.W_kr(x), positions))
    # 把W_uk吸收进查询:(batch_size*num_heads，1，kv_lora_rank)
    q_latent = torch.bmm(q_nope, W_uk).transpose(0, 1).reshape(-1, 1, kv_lora_rank)
    c_rep, k_rep = repeat_kv(c_kv, num_heads), repeat_kv(k_pe, num_heads)
    scores = (torch.bmm(q_latent, c_rep.transpose(1, 2))
              + torch.bmm(q_pe, k_rep.transpose(1, 2)))
    scores = scores / math.sqrt(head_size + q_pe.shape[-1])
    weights = F.softmax(scores, dim=-1)
    # 在潜空间中加权，再乘W_uv:(num_heads，batch_size，head_size)
    o_latent = torch.bmm(weights, c_rep).reshape(batch_size, num_heads, kv_lora_rank)
    output = torch.bmm(o_latent.transpose(0, 1), W_uv.transpose(1, 2))
    return mla.W_o(output.transpose(0, 1).reshape(batch_size, 1, -1))''',

    "gqa_to_mla": '''#@save
def gqa_to_mla(gqa, qk_rope_head_dim=2):
    """把GQA写成缓存同样大小的MLA"""
    num_heads, num_kv_heads = gqa.num_heads, gqa.num_kv_heads
    num_hiddens = gqa.W_q.out_features
    head_size = num_hiddens // num_heads
    group_size = num_heads // num_kv_heads
    kv_size = num_kv_heads * head_size
    mla = MultiHeadLatentAttention(num_hiddens, num_heads, 2 * kv_size,
                                   qk_rope_head_dim, 0)
    mla.to(gqa.W_q.weight.device, gqa.W_q.weight.dtype)
    scale = math.sqrt((head_size + qk_rope_head_dim) / head_size)
    with torch.no_grad():
        mla.W_dkv.weight.copy_(torch.cat((gqa.W_k.weight, gqa.W_v.weight)))
        mla.W_uk.weight.zero_()
        mla.W_uv.weight.zero_()
        eye = torch.eye(head_size)
        for i in range(num_heads):
            # 第i个查询头用第i//group_size个键值头
            j = i // group_size
            rows = slice(i * head_size, (i + 1) * head_size)
            mla.W_uk.weight[rows, j * head_size:(j + 1) * head_size] = eye
            mla.W_uv.weight[rows, kv_size + j * head_size:kv_size + (j + 1) * head_size] = eye
        mla.W_qr.weight.zero_()
        mla.W_kr.weight.zero_()
        mla.W_q.weight.copy_(gqa.W_q.weight * scale)
        mla.W_o.weight.copy_(gqa.W_o.weight)
    return mla''',

    "load_deepseek_mla": '''#@save
def load_deepseek_mla(state_dict, num_heads, qk_nope_head_dim,
                      qk_rope_head_dim):
    """把DeepSeek排列的一层MLA权重装入MultiHeadLatentAttention"""
    wq, wkv_a = state_dict['wq.weight'], state_dict['wkv_a.weight']
    wkv_b, wo = state_dict['wkv_b.weight'], state_dict['wo.weight']
    num_hiddens, kv_lora_rank = wq.shape[1], wkv_b.shape[1]
    nope, rope = qk_nope_head_dim, qk_rope_head_dim
    # 交错排列的第2i、2i+1行分别放到对半排列的第i、i+rope/2行
    perm = torch.arange(rope).reshape(-1, 2).T.reshape(-1).to(wq.device)
    wq = wq.reshape(num_heads, nope + rope, num_hiddens)
    wkv_b = wkv_b.reshape(num_heads, 2 * nope, kv_lora_rank)
    mla = MultiHeadLatentAttention(num_hiddens, num_heads, kv_lora_rank,
                                   rope, 0, head_size=nope)
    mla.to(wq.device, wq.dtype)
    with torch.no_grad():
        mla.W_q.weight.copy_(wq[:, :nope].reshape(-1, num_hiddens))
        mla.W_qr.weight.copy_(
            wq[:, nope:].index_select(1, perm).reshape(-1, num_hiddens))
        mla.W_dkv.weight.copy_(wkv_a[:kv_lora_rank])
        mla.W_kr.weight.copy_(wkv_a[kv_lora_rank:].index_select(0, perm))
        mla.W_uk.weight.copy_(wkv_b[:, :nope].reshape(-1, kv_lora_rank))
        mla.W_uv.weight.copy_(wkv_b[:, nope:].reshape(-1, kv_lora_rank))
        mla.W_o.weight.copy_(wo)
    return mla''',

    "mha_to_mla_svd": '''#@save
def mha_to_mla_svd(mha, kv_lora_rank, qk_rope_head_dim=2):
    """对[W_k; W_v]做联合截断SVD，把多头注意力转换为MLA"""
    num_heads, num_hiddens = mha.num_heads, mha.W_q.out_features
    head_size = num_hiddens // num_heads
    mla = MultiHeadLatentAttention(num_hiddens, num_heads, kv_lora_rank,
                                   qk_rope_head_dim, 0)
    mla.to(mha.W_q.weight.device, mha.W_q.weight.dtype)
    W = torch.cat((mha.W_k.weight, mha.W_v.weight)).detach().double()
    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    # 奇异值开方后两边各放一半
    root = S[:kv_lora_rank].sqrt()
    up = U[:, :kv_lora_rank] * root
    with torch.no_grad():
        mla.W_dkv.weight.copy_(root[:, None] * Vh[:kv_lora_rank])
        mla.W_uk.weight.copy_(up[:num_hiddens])
        mla.W_uv.weight.copy_(up[num_hiddens:])
        mla.W_qr.weight.zero_()
        mla.W_kr.weight.zero_()
        scale = math.sqrt((head_size + qk_rope_head_dim) / head_size)
        mla.W_q.weight.copy_(mha.W_q.weight * scale)
        mla.W_o.weight.copy_(mha.W_o.weight)
    return mla''',
}

# ---------------------------------------------------------------------------------------------------------------
# the deck's code, read from the deck (a cell of the deck may define a helper the answer calls: it goes with it)

DECK = "notebooks/04_rope_mla.ipynb"
DECK_CELLS = {"apply_rope": ("rotate_half", "apply_rope"), "mla_cache_bytes": ("mla_cache_bytes",),
              "gqa_equivalent_groups": ("gqa_equivalent_groups",),
              "multi_head_latent_attention": ("MultiHeadLatentAttention",), "latent_cache": ("LatentCache",),
              "mla_decode_step": ("mla_decode_step",), "absorbed_decode_step": ("absorbed_decode_step",)}


def _deck_answers():
    """{solution grade_id: the deck's definitions of the names that answer it, in order}."""
    found = deck_definitions(__file__, DECK, {name: name for names in DECK_CELLS.values() for name in names})
    return {cell: "\n\n\n".join(found[name] for name in names if name in found)
            for cell, names in DECK_CELLS.items() if names[-1] in found}


# ---------------------------------------------------------------------------------------------------------------
# a correct answer in the style of Hugging Face transformers (modeling_deepseek_v2.py)

HF_STYLE = {
    "apply_rope": '''def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(X, positions, base=10000):
    dim = X.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=X.device, dtype=torch.float) / dim))
    freqs = torch.einsum("i,j->ij", positions.to(device=X.device, dtype=torch.float), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(X.dtype), emb.sin().to(X.dtype)
    return (X * cos) + (rotate_half(X) * sin)''',

    "multi_head_latent_attention": '''class EagerAttention(nn.Module):
    """softmax(Q K^T * scaling + 掩码) V；softmax 在 float32 中计算，保存 attention_weights。"""
    def __init__(self, dropout):
        super().__init__()
        self.p = dropout

    def forward(self, query, key, value, keep=None):
        scaling = query.shape[-1] ** -0.5
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
        if keep is not None:
            attn_weights = attn_weights.masked_fill(~keep, torch.finfo(attn_weights.dtype).min)
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
        self.attention_weights = attn_weights.flatten(0, 1)
        attn_weights = F.dropout(attn_weights, p=self.p, training=self.training)
        return torch.matmul(attn_weights, value)


class MultiHeadLatentAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, kv_lora_rank, qk_rope_head_dim, dropout, head_size=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.qk_nope_head_dim = self.v_head_dim = num_hiddens // num_heads if head_size is None else head_size
        self.qk_rope_head_dim = qk_rope_head_dim
        self.W_q = nn.Linear(num_hiddens, num_heads * self.qk_nope_head_dim, bias=False)
        self.W_qr = nn.Linear(num_hiddens, num_heads * qk_rope_head_dim, bias=False)
        self.W_dkv = nn.Linear(num_hiddens, kv_lora_rank, bias=False)
        self.W_uk = nn.Linear(kv_lora_rank, num_heads * self.qk_nope_head_dim, bias=False)
        self.W_uv = nn.Linear(kv_lora_rank, num_heads * self.v_head_dim, bias=False)
        self.W_kr = nn.Linear(num_hiddens, qk_rope_head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.v_head_dim, num_hiddens, bias=False)
        self.attention = EagerAttention(dropout)

    def forward(self, X, valid_lens):
        bsz, q_len, _ = X.size()
        position_ids = torch.arange(q_len, device=X.device)
        q_nope = self.W_q(X).view(bsz, q_len, self.num_heads, -1).transpose(1, 2)
        q_pe = apply_rope(self.W_qr(X).view(bsz, q_len, self.num_heads, -1).transpose(1, 2), position_ids)
        compressed_kv = self.W_dkv(X)
        k_pe = apply_rope(self.W_kr(X).view(bsz, 1, q_len, -1), position_ids)
        k_nope = self.W_uk(compressed_kv).view(bsz, q_len, self.num_heads, -1).transpose(1, 2)
        value_states = self.W_uv(compressed_kv).view(bsz, q_len, self.num_heads, -1).transpose(1, 2)
        query_states = torch.cat([q_nope, q_pe], dim=-1)
        key_states = torch.cat([k_nope, k_pe.expand(-1, self.num_heads, -1, -1)], dim=-1)
        keep = None
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(bsz, q_len)
            keep = (torch.arange(q_len, device=X.device) < lens[..., None])[:, None]
        attn_output = self.attention(query_states, key_states, value_states, keep)
        return self.W_o(attn_output.transpose(1, 2).reshape(bsz, q_len, -1))'''
}

ALSO_CORRECT = {"hf_style": HF_STYLE}
_DECK = _deck_answers()
if _DECK:
    ALSO_CORRECT["deck"] = _DECK

# ---------------------------------------------------------------------------------------------------------------
# mistakes

# A student who writes the attention by hand instead of using d2l.DotProductAttention (correct as written here;
# the variants below break one thing in it).
_OWN_ATTENTION = '''class ScaledDotProduct(nn.Module):
    """softmax(Q K^T / sqrt(scale_dim)) V，用 einsum 写。"""
    def __init__(self, dropout, scale_dim=None):
        super().__init__()
        self.scale_dim = scale_dim
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        scale_dim = queries.shape[-1] if self.scale_dim is None else self.scale_dim
        scores = torch.einsum("bqd,bkd->bqk", queries, keys) / math.sqrt(scale_dim)
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
            keep = torch.arange(keys.shape[1], device=keys.device) < lens[..., None]
            scores = scores.masked_fill(~keep, float("-inf"))
        self.attention_weights = torch.softmax(scores, dim=-1)
        return torch.einsum("bqk,bkd->bqd", self.dropout(self.attention_weights), values)


'''


def _own(*pairs):
    """Edits of the reference MultiHeadLatentAttention that swap in ScaledDotProduct, then `pairs`."""
    return {"multi_head_latent_attention": [
        ("class MultiHeadLatentAttention(nn.Module):", _OWN_ATTENTION + "class MultiHeadLatentAttention(nn.Module):"),
        ("self.attention = d2l.DotProductAttention(dropout)  # 按查询的长度 d_h + d_h^R 缩放",
         "self.attention = ScaledDotProduct(dropout)"), *pairs]}


_MLA_ALL = {"test_mla_shapes", "test_mla_forward", "test_mla_valid_lens"}
_MLA_VALUES = {"test_mla_forward", "test_mla_valid_lens"}
_ROPE_ALL = {"test_rope", "test_rope_precision"}
_DECODE_ALL = {"test_mla_decode", "test_mla_decode_cache"}
_SVD_ALL = {"test_mla_svd_error", "test_mla_svd_function"}
_DEEPSEEK_ALL = {"test_deepseek_load_structure", "test_deepseek_load_function"}
_CACHE_APPEND = "latents, rope_keys = cache.append(mla.W_dkv(x), apply_rope(mla.W_kr(x), positions))"
_SDPA_FORWARD = '''        output = self.attention(queries, keys, values, valid_lens)
        return self.W_o(transpose_output(output, h))'''
_ROPE_ANGLES = "angles = positions.to(device=X.device, dtype=torch.float32)[:, None] * theta  # (n, d/2)"
_ROPE_THETA = "theta = base ** (-torch.arange(0, d, 2, device=X.device, dtype=torch.float32) / d)"
_ROPE_HALF = "rotated = torch.cat([-X[..., d // 2:], X[..., :d // 2]], dim=-1)  # rotate_half"
_DECODE_POSITIONS = "positions = torch.arange(start, start + t_new, device=x.device)  # 新词元接在已有的 start 个之后"
_DECODE_LENS = "valid_lens = torch.arange(start + 1, start + t_new + 1, device=x.device).repeat(x.shape[0] * h, 1)"
_ABSORB_SCORES = '''    scores = (torch.einsum("bhc,btc->bht", q_latent, latents)
              + torch.einsum("bhr,btr->bht", q_r, rope_keys)) / math.sqrt(d_h + q_r.shape[-1])'''
_SELECT = ("select = torch.repeat_interleave(select.reshape(g, d_h, g * d_h), n_rep, dim=0)"
           ".reshape(h * d_h, g * d_h)")
_GQA_SCALE = "mla.W_q.weight.copy_(gqa.W_q.weight * math.sqrt((d_h + qk_rope_head_dim) / d_h))"
_SVD_SCALE = "mla.W_q.weight.copy_(mha.W_q.weight * math.sqrt((d_h + qk_rope_head_dim) / d_h))"
_SVD = '''    W = torch.cat([mha.W_k.weight, mha.W_v.weight], dim=0).double()  # (2D, D)：键和值一起分解
    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    up = U[:, :r] * S[:r]  # (2D, r)
    with torch.no_grad():
        mla.W_dkv.weight.copy_(Vh[:r])
        mla.W_uk.weight.copy_(up[:num_hiddens])
        mla.W_uv.weight.copy_(up[num_hiddens:])'''

VARIANTS = [
    # ---- question 1: apply_rope
    {"id": "rope_interleaved",
     "mistake": "照 RoFormer 论文写成相邻两维 (2i, 2i+1) 一对的交错配对，而题目（与 Llama、DeepSeek 的 HF 代码）用前后两半配对",
     "edits": {"apply_rope": [
         ("cos = torch.cat([angles.cos(), angles.cos()], dim=-1).to(X.dtype)",
          "cos = angles.cos().repeat_interleave(2, dim=-1).to(X.dtype)"),
         ("sin = torch.cat([angles.sin(), angles.sin()], dim=-1).to(X.dtype)",
          "sin = angles.sin().repeat_interleave(2, dim=-1).to(X.dtype)"),
         (_ROPE_HALF, "rotated = torch.stack([-X[..., 1::2], X[..., 0::2]], dim=-1).flatten(-2)  # 相邻两维一对")]},
     "caught_by": _ROPE_ALL},
    {"id": "rope_freq_without_2",
     "mistake": "频率写成 base^(-i/d)（i = 0…d/2-1），漏了指数里的 2：高维的频率转得太快",
     "edits": {"apply_rope": [(_ROPE_THETA,
                               "theta = base ** (-torch.arange(0, d // 2, device=X.device, dtype=torch.float32) / d)")]},
     "caught_by": _ROPE_ALL},
    {"id": "rope_sign",
     "mistake": "rotate_half 写成 (x2, -x1)：旋转方向反了（相对性质仍成立，与训练好的权重对不上）",
     "edits": {"apply_rope": [(_ROPE_HALF, "rotated = torch.cat([X[..., d // 2:], -X[..., :d // 2]], dim=-1)")]},
     "caught_by": _ROPE_ALL},
    {"id": "rope_bf16_angles",
     "mistake": "位置与角度按输入的数据类型计算：bfloat16 的位置 4000 附近只能表示 16 的倍数，角度全错",
     "edits": {"apply_rope": [(_ROPE_THETA, _ROPE_THETA.replace("dtype=torch.float32", "dtype=X.dtype")),
                              (_ROPE_ANGLES, _ROPE_ANGLES.replace("dtype=torch.float32", "dtype=X.dtype"))]},
     "caught_by": {"test_rope_precision"}},
    {"id": "rope_base_ignored",
     "mistake": "把 10000 写死在公式里，忽略了参数 base",
     "edits": {"apply_rope": [(_ROPE_THETA, _ROPE_THETA.replace("theta = base **", "theta = 10000 **"))]},
     "caught_by": {"test_rope"}},
    {"id": "rope_positions_from_zero",
     "mistake": "忽略参数 positions，总用 0, 1, …, n-1 作位置",
     "edits": {"apply_rope": [(_ROPE_ANGLES, "angles = torch.arange(X.shape[-2], device=X.device, "
                                             "dtype=torch.float32)[:, None] * theta")]},
     "caught_by": _ROPE_ALL},
    # ---- question 2: mla_cache_bytes, gqa_equivalent_groups
    {"id": "bytes_factor_2",
     "mistake": "照搬 KV 缓存的公式乘了 2：以为潜向量也像键和值那样各存一份",
     "edits": {"mla_cache_bytes": [("return (kv_lora_rank + qk_rope_head_dim) * num_layers",
                                    "return 2 * (kv_lora_rank + qk_rope_head_dim) * num_layers")]},
     "caught_by": {"test_mla_cache_bytes"}},
    {"id": "bytes_no_rope_key",
     "mistake": "缓存只算了潜向量 d_c，漏了解耦 RoPE 的共用旋转键 d_h^R",
     "edits": {"mla_cache_bytes": [("return (kv_lora_rank + qk_rope_head_dim) * num_layers",
                                    "return kv_lora_rank * num_layers")]},
     "caught_by": {"test_mla_cache_bytes"}},
    {"id": "groups_without_2",
     "mistake": "等价组数除以 d_h 而不是 2 d_h：忘了 GQA 每组存键和值两份",
     "edits": {"gqa_equivalent_groups": [("/ (2 * head_dim)", "/ head_dim")]},
     "caught_by": {"test_mla_cache_bytes"}},
    # ---- question 3: MultiHeadLatentAttention
    {"id": "mla_rope_key_per_head",
     "mistake": "每个头一个旋转键：W_kr 输出 num_heads*d_h^R 维，缓存随头数变大，丢掉了解耦 RoPE 的意义",
     "edits": {"multi_head_latent_attention": [
         ("self.W_kr = nn.Linear(num_hiddens, qk_rope_head_dim, bias=False)",
          "self.W_kr = nn.Linear(num_hiddens, num_heads * qk_rope_head_dim, bias=False)"),
         ("rope_keys = apply_rope(self.W_kr(X), positions)  # (batch_size, n, d_h^R)：所有头共用",
          "rope_keys = apply_rope(transpose_qkv(self.W_kr(X), h), positions)  # 每个头一个"),
         ("repeat_kv(rope_keys, h)], dim=-1)", "rope_keys], dim=-1)")]},
     "caught_by": _MLA_ALL},
    {"id": "mla_rope_on_latent",
     "mistake": "把 RoPE 作用在潜向量上（以为位置要进缓存的内容），而不是只作用在解耦的旋转部分",
     "edits": {"multi_head_latent_attention": [
         ("latents = self.W_dkv(X)  # (batch_size, n, d_c)：解码时缓存的就是它",
          "latents = apply_rope(self.W_dkv(X), positions)  # 潜向量也旋转")]},
     "caught_by": _MLA_ALL},
    {"id": "mla_scale_without_rope_dim",
     "mistake": "自己写的注意力按 sqrt(d_h) 缩放，漏了旋转部分的 d_h^R",
     "edits": _own(("self.attention = ScaledDotProduct(dropout)",
                    "self.attention = ScaledDotProduct(dropout, head_dim)")),
     "caught_by": _MLA_VALUES},
    {"id": "mla_valid_lens_tiled",
     "mistake": "用 repeat 而不是 repeat_interleave 扩展 valid_lens（批量为 1 或长度相同时看不出来）",
     "edits": {"multi_head_latent_attention": [
         ("valid_lens = torch.repeat_interleave(valid_lens, repeats=h, dim=0)",
          "valid_lens = valid_lens.repeat(h) if valid_lens.dim() == 1 else valid_lens.repeat(h, 1)")]},
     "caught_by": {"test_mla_valid_lens"}},
    {"id": "mla_forgets_W_o",
     "mistake": "忘了输出投影 W_o，直接返回拼接的各头输出（num_heads*d_h = num_hiddens，形状看不出来）",
     "edits": {"multi_head_latent_attention": [("return self.W_o(transpose_output(output, h))",
                                                "return transpose_output(output, h)")]},
     "caught_by": _MLA_ALL},
    {"id": "own_attention_correct",
     "mistake": "（不是错误）自己写缩放点积注意力而不用 d2l.DotProductAttention：应得满分",
     "edits": _own(),
     "caught_by": set()},
    {"id": "mla_dropout_ignores_eval",
     "mistake": "自己写的注意力用 F.dropout(x, p) 而不是 nn.Dropout：eval() 下仍在暂退",
     "edits": _own(("self.dropout(self.attention_weights)", "F.dropout(self.attention_weights, self.dropout.p)")),
     "caught_by": {"test_mla_forward"}},
    {"id": "mla_weights_not_stored",
     "mistake": "自己写的注意力没有把权重存进 self.attention_weights",
     "edits": _own(("self.attention_weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=-1)"),
                   ("self.dropout(self.attention_weights)", "self.dropout(weights)")),
     "caught_by": {"test_mla_shapes"}},
    {"id": "mla_sdpa",
     "mistake": "用题目禁止的 F.scaled_dot_product_attention 作答（它的默认缩放正好是 1/sqrt(d_h + d_h^R)）",
     "edits": {"multi_head_latent_attention": [(_SDPA_FORWARD, '''        keep = None
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(-1, X.shape[1])
            keep = (torch.arange(X.shape[1], device=X.device) < lens.repeat_interleave(h, 0)[..., None])
        output = F.scaled_dot_product_attention(queries, keys, values, attn_mask=keep)
        return self.W_o(transpose_output(output, h))''')]},
     "caught_by": _MLA_ALL},
    # ---- question 4: LatentCache, mla_decode_step
    {"id": "cache_cat_dim0",
     "mistake": "LatentCache 沿第 0 维拼接：把新词元当成了新的样本",
     "edits": {"latent_cache": [("latents = torch.cat([self.latents, latents], dim=1)",
                                 "latents = torch.cat([self.latents, latents], dim=0)"),
                                ("rope_keys = torch.cat([self.rope_keys, rope_keys], dim=1)",
                                 "rope_keys = torch.cat([self.rope_keys, rope_keys], dim=0)")]},
     "caught_by": {"test_latent_cache"}},
    {"id": "decode_position_zero",
     "mistake": "解码时新词元的位置从 0 算起（忘了已有的词元），查询和新的旋转键都转错了角度",
     "edits": {"mla_decode_step": [(_DECODE_POSITIONS, "positions = torch.arange(t_new, device=x.device)")]},
     "caught_by": _DECODE_ALL},
    {"id": "decode_top_left_causal",
     "mistake": "因果掩码左上对齐：第 j 个新词元只看前 j + 1 个词元，忘了缓存里已有的 t 个（与 SDPA 的 is_causal 在查询少于键时一样）",
     "edits": {"mla_decode_step": [(_DECODE_LENS, _DECODE_LENS.replace("torch.arange(start + 1, start + t_new + 1,",
                                                                       "torch.arange(1, t_new + 1,"))]},
     "caught_by": {"test_mla_decode"}},
    {"id": "decode_no_mask",
     "mistake": "照第 3 讲的解码一步不加掩码：一次放入多个词元时，前面的词元看到了后面的",
     "edits": {"mla_decode_step": [("output = mla.attention(queries, keys, values, valid_lens)",
                                    "output = mla.attention(queries, keys, values, None)")]},
     "caught_by": {"test_mla_decode"}},
    {"id": "decode_forgets_W_o",
     "mistake": "mla_decode_step 忘了输出投影 W_o",
     "edits": {"mla_decode_step": [("    return mla.W_o(transpose_output(output, h))",
                                    "    return transpose_output(output, h)")]},
     "caught_by": {"test_mla_decode"}},
    {"id": "decode_caches_up_projected",
     "mistake": "把上投影之后的键和值也存进缓存（Hugging Face 参考实现的做法），缓存又和多头注意力一样大",
     "edits": {"mla_decode_step": [("    values = transpose_qkv(mla.W_uv(latents), h)\n",
                                    "    values = transpose_qkv(mla.W_uv(latents), h)\n"
                                    "    cache.keys, cache.values = keys, values  # 下一步可以直接用\n")]},
     "caught_by": {"test_mla_decode_cache"}},
    # ---- question 5: absorbed_decode_step
    {"id": "absorbed_scale_latent",
     "mistake": "吸收之后把 [q 的潜空间部分; 旋转部分] 交给 d2l 的注意力：它按 sqrt(d_c + d_h^R) 缩放，而不是 sqrt(d_h + d_h^R)",
     "edits": {"absorbed_decode_step": [(_ABSORB_SCORES, _ABSORB_SCORES.replace(
         "math.sqrt(d_h + q_r.shape[-1])", "math.sqrt(d_c + q_r.shape[-1])"))]},
     "caught_by": {"test_absorbed_decode"}},
    {"id": "absorbed_reshape_order",
     "mistake": "按头切 W_uk 时 reshape 的顺序反了：(d_h, h, d_c) 再交换，每个头拿到的是各头交错的行",
     "edits": {"absorbed_decode_step": [("W_uk = mla.W_uk.weight.reshape(h, -1, d_c)",
                                         "W_uk = mla.W_uk.weight.reshape(-1, h, d_c).transpose(0, 1)")]},
     "caught_by": {"test_absorbed_decode"}},
    {"id": "absorbed_missing_transpose",
     "mistake": "忘了 nn.Linear 的 weight 是 (输出, 输入)：把 W_uv.weight 当成 (d_c, h*d_h) 来切，少了一次转置",
     "edits": {"absorbed_decode_step": [
         ("W_uv = mla.W_uv.weight.reshape(h, -1, d_c)", "W_uv = mla.W_uv.weight.reshape(h, d_c, -1)"),
         ('torch.einsum("bhc,hdc->bhd", o_latent, W_uv)', 'torch.einsum("bhc,hcd->bhd", o_latent, W_uv)')]},
     "caught_by": {"test_absorbed_decode"}},
    {"id": "absorbed_up_projects",
     "mistake": "“吸收”时仍调用 W_uk(latents)、W_uv(latents) 上投影整个缓存，只是换了个写法",
     "edits": {"absorbed_decode_step": [
         ('q_latent = torch.einsum("bhd,hdc->bhc", q_c, W_uk)  # 把 W_uk 吸收进查询：(B, h, d_c)',
          'keys = mla.W_uk(latents).reshape(B, -1, h, d_h)'),
         ('torch.einsum("bhc,btc->bht", q_latent, latents)', 'torch.einsum("bhd,bthd->bht", q_c, keys)'),
         ('o_latent = torch.einsum("bht,btc->bhc", weights, latents)  # 在潜空间中加权',
          'values = mla.W_uv(latents).reshape(B, -1, h, d_h)'),
         ('torch.einsum("bhc,hdc->bhd", o_latent, W_uv)', 'torch.einsum("bht,bthd->bhd", weights, values)')]},
     "caught_by": {"test_absorbed_decode", "test_absorbed_decode_cache"}},
    # ---- question 6: gqa_to_mla
    {"id": "gqa_to_mla_tiled",
     "mistake": "选择矩阵用 repeat 平铺：查询头 i 拿到键值头 i % g，而不是 i // n_rep",
     "edits": {"gqa_to_mla": [(_SELECT, "select = select.reshape(g, d_h, g * d_h).repeat(n_rep, 1, 1).reshape(h * d_h, g * d_h)")]},
     "caught_by": {"test_gqa_to_mla"}},
    {"id": "gqa_to_mla_no_scale",
     "mistake": "W_q 原样复制，没有补偿 MLA 多出来的 d_h^R：注意力分布变平",
     "edits": {"gqa_to_mla": [(_GQA_SCALE, "mla.W_q.weight.copy_(gqa.W_q.weight)")]},
     "caught_by": {"test_gqa_to_mla"}},
    {"id": "gqa_to_mla_mha_latent",
     "mistake": "潜向量取每个查询头的键和值（2*h*d_h 维）：函数相同，缓存却和多头注意力一样大",
     "edits": {"gqa_to_mla": [
         ("mla = MultiHeadLatentAttention(num_hiddens, h, 2 * g * d_h, qk_rope_head_dim, 0.0)",
          "mla = MultiHeadLatentAttention(num_hiddens, h, 2 * h * d_h, qk_rope_head_dim, 0.0)"),
         ("mla.W_dkv.weight.copy_(torch.cat([gqa.W_k.weight, gqa.W_v.weight], dim=0))",
          "mla.W_dkv.weight.copy_(torch.cat([select @ gqa.W_k.weight, select @ gqa.W_v.weight], dim=0))"),
         ("mla.W_uk.weight.copy_(torch.cat([select, zeros], dim=1))",
          "eye = torch.eye(h * d_h).to(select)\n"
          "        mla.W_uk.weight.copy_(torch.cat([eye, torch.zeros_like(eye)], dim=1))"),
         ("mla.W_uv.weight.copy_(torch.cat([zeros, select], dim=1))",
          "mla.W_uv.weight.copy_(torch.cat([torch.zeros_like(eye), eye], dim=1))")]},
     "caught_by": {"test_gqa_to_mla_cache"}},
    # ---- question 7: mha_to_mla_svd
    {"id": "svd_separate",
     "mistake": "对 W_k 和 W_v 分别做截断 SVD（各取 r/2），不是联合分解：同样的缓存，误差更大",
     "edits": {"mha_to_mla_svd": [(_SVD, '''    half = r // 2
    parts = []
    for weight, rank in ((mha.W_k.weight, half), (mha.W_v.weight, r - half)):
        U, S, Vh = torch.linalg.svd(weight.double(), full_matrices=False)
        parts.append((U[:, :rank] * S[:rank], Vh[:rank]))
    with torch.no_grad():
        mla.W_dkv.weight.copy_(torch.cat([parts[0][1], parts[1][1]]))
        mla.W_uk.weight.copy_(torch.cat([parts[0][0], torch.zeros(num_hiddens, r - half).to(parts[0][0])], dim=1))
        mla.W_uv.weight.copy_(torch.cat([torch.zeros(num_hiddens, half).to(parts[1][0]), parts[1][0]], dim=1))''')]},
     "caught_by": _SVD_ALL},
    {"id": "svd_factors_swapped",
     "mistake": "左右奇异向量用反了：W_dkv 取 U 的列，形状对不上",
     "edits": {"mha_to_mla_svd": [("mla.W_dkv.weight.copy_(Vh[:r])", "mla.W_dkv.weight.copy_(U[:, :r].T)")]},
     "caught_by": _SVD_ALL},
    {"id": "svd_eigh_ascending",
     "mistake": "用 torch.linalg.eigh(WᵀW) 求右奇异向量，却取了前 r 个：eigh 按特征值从小到大排列，保留的是最小的方向",
     "edits": {"mha_to_mla_svd": [(_SVD, '''    W = torch.cat([mha.W_k.weight, mha.W_v.weight], dim=0).double()
    eigenvalues, V = torch.linalg.eigh(W.T @ W)  # WᵀW = V diag(s²) Vᵀ
    V_r = V[:, :r]
    up = W @ V_r
    with torch.no_grad():
        mla.W_dkv.weight.copy_(V_r.T)
        mla.W_uk.weight.copy_(up[:num_hiddens])
        mla.W_uv.weight.copy_(up[num_hiddens:])''')]},
     "caught_by": {"test_mla_svd_error"}},
    {"id": "svd_no_scale",
     "mistake": "W_q 原样复制，没有补偿 MLA 多出来的 d_h^R",
     "edits": {"mha_to_mla_svd": [(_SVD_SCALE, "mla.W_q.weight.copy_(mha.W_q.weight)")]},
     "caught_by": {"test_mla_svd_function"}},
    # ---- added for issue 40: head sizes, what gets rotated, valid_lens, shared caches, DeepSeek's layout, SVD factors
    {"id": "mla_head_size_ignored",
     "mistake": "每头维度写死成 num_hiddens // num_heads，忽略了 head_size（DeepSeek-V2/V3 的头宽不是它）",
     "edits": {"multi_head_latent_attention": [("head_dim = num_hiddens // num_heads if head_size is None else head_size",
                                                "head_dim = num_hiddens // num_heads")]},
     "caught_by": {"test_mla_shapes"}},
    {"id": "mla_ignores_valid_lens",
     "mistake": "注意力调用时没有传 valid_lens：填充的词元也参与了加权",
     "edits": {"multi_head_latent_attention": [("output = self.attention(queries, keys, values, valid_lens)",
                                                "output = self.attention(queries, keys, values, None)")]},
     "caught_by": {"test_mla_valid_lens"}},
    {"id": "mla_uk_uv_swapped",
     "mistake": "键用了值的上投影 W_uv、值用了键的上投影 W_uk（第 2 讲“W_q 用在键上”的同类错误）",
     "edits": {"multi_head_latent_attention": [
         ("keys = torch.cat([transpose_qkv(self.W_uk(latents), h)", "keys = torch.cat([transpose_qkv(self.W_uv(latents), h)"),
         ("values = transpose_qkv(self.W_uv(latents), h)", "values = transpose_qkv(self.W_uk(latents), h)")]},
     "caught_by": _MLA_VALUES},
    {"id": "mla_rope_before_split",
     "mistake": "旋转查询在拆头之前就旋转：把 h 个头的旋转部分当成一个 h·d_h^R 维的向量配对",
     "edits": {"multi_head_latent_attention": [("apply_rope(transpose_qkv(self.W_qr(X), h), positions)",
                                                "transpose_qkv(apply_rope(self.W_qr(X), positions), h)")]},
     "caught_by": _MLA_VALUES},
    {"id": "mla_rope_on_content",
     "mistake": "把拼好的整个查询和键（内容部分加旋转部分）都旋转了，而不是只旋转解耦的那一段",
     "edits": {"multi_head_latent_attention": [
         ("queries = torch.cat([transpose_qkv(self.W_q(X), h), apply_rope(transpose_qkv(self.W_qr(X), h), positions)], dim=-1)",
          "queries = apply_rope(torch.cat([transpose_qkv(self.W_q(X), h), transpose_qkv(self.W_qr(X), h)], dim=-1), positions)"),
         ("keys = torch.cat([transpose_qkv(self.W_uk(latents), h), repeat_kv(rope_keys, h)], dim=-1)",
          "keys = apply_rope(torch.cat([transpose_qkv(self.W_uk(latents), h), repeat_kv(self.W_kr(X), h)], dim=-1), positions)")]},
     "caught_by": _MLA_VALUES},
    {"id": "cache_upcasts_float32",
     "mistake": "LatentCache 把存进来的张量转成 float32（以为更精确）：半精度的缓存占的显存翻倍，数据类型也变了",
     "edits": {"latent_cache": [("        self.latents, self.rope_keys = latents, rope_keys\n        return latents, rope_keys",
                                 "        self.latents, self.rope_keys = latents.float(), rope_keys.float()  # float32 更精确\n"
                                 "        return self.latents, self.rope_keys")]},
     "caught_by": {"test_latent_cache"}},
    {"id": "decode_positions_from_one",
     "mistake": "解码时位置从 1 数起：输出不变（只差一个整体平移），缓存里的旋转键却都多转了一个位置",
     "edits": {"mla_decode_step": [(_DECODE_POSITIONS, "positions = torch.arange(start + 1, start + t_new + 1, device=x.device)")]},
     "caught_by": {"test_mla_decode_cache"}},
    {"id": "decode_caches_unrotated_key",
     "mistake": "缓存里存没有旋转的键，每步读出时再按 0…t 旋转：单独使用时输出对，缓存的内容与题目规定的不同",
     "edits": {"mla_decode_step": [(_CACHE_APPEND, "latents, rope_keys = cache.append(mla.W_dkv(x), mla.W_kr(x))  # 读出时再旋转\n"
                                                   "    rope_keys = apply_rope(rope_keys, torch.arange(rope_keys.shape[1], device=x.device))")]},
     "caught_by": {"test_mla_decode_cache"}},
    {"id": "decode_caches_float32",
     "mistake": "mla_decode_step 把 float32 的潜向量和旋转键存进缓存、读出时再转回：半精度时缓存的数据类型不对，显存翻倍",
     "edits": {"mla_decode_step": [(_CACHE_APPEND, "latents, rope_keys = cache.append(mla.W_dkv(x).float(), "
                                                   "apply_rope(mla.W_kr(x), positions).float())  # 缓存用 float32\n"
                                                   "    latents, rope_keys = latents.to(x.dtype), rope_keys.to(x.dtype)")]},
     "caught_by": {"test_mla_decode_cache"}},
    {"id": "absorbed_positions_from_one",
     "mistake": "吸收后的解码步把位置从 1 数起：只用它自己时输出不变，与 mla_decode_step 共用缓存时就错了",
     "edits": {"absorbed_decode_step": [("positions = torch.arange(start, start + 1, device=x.device)",
                                         "positions = torch.arange(start + 1, start + 2, device=x.device)")]},
     "caught_by": {"test_absorbed_decode_cache"}},
    {"id": "absorbed_caches_unrotated_key",
     "mistake": "吸收后的解码步在缓存里存没有旋转的键，读出时再按 0…t 旋转",
     "edits": {"absorbed_decode_step": [(_CACHE_APPEND, "latents, rope_keys = cache.append(mla.W_dkv(x), mla.W_kr(x))  # 读出时再旋转\n"
                                                        "    rope_keys = apply_rope(rope_keys, torch.arange(rope_keys.shape[1], device=x.device))")]},
     "caught_by": {"test_absorbed_decode_cache"}},
    {"id": "absorbed_scale_without_rope_dim",
     "mistake": "吸收之后按 sqrt(d_h) 缩放，漏了旋转部分的 d_h^R",
     "edits": {"absorbed_decode_step": [("math.sqrt(d_h + q_r.shape[-1])", "math.sqrt(d_h)")]},
     "caught_by": {"test_absorbed_decode"}},
    {"id": "absorbed_scale_from_num_hiddens",
     "mistake": "缩放里的每头维度按 num_hiddens // num_heads 算：head_size 不等于它时缩放错了",
     "edits": {"absorbed_decode_step": [("math.sqrt(d_h + q_r.shape[-1])", "math.sqrt(x.shape[-1] // h + q_r.shape[-1])")]},
     "caught_by": {"test_absorbed_decode"}},
    # ---- question 6: load_deepseek_mla
    {"id": "ds_no_permute",
     "mistake": "DeepSeek 的旋转行按交错写法排列，直接交给对半写法的 apply_rope：不报错，分数却错了",
     "edits": {"load_deepseek_mla": [("q[:, d_h:][:, half_split]", "q[:, d_h:]"), ("wkv_a[d_c:][half_split]", "wkv_a[d_c:]")]},
     "caught_by": _DEEPSEEK_ALL},
    {"id": "ds_query_not_permuted",
     "mistake": "只重排了共用旋转键的行，忘了每个头的旋转查询",
     "edits": {"load_deepseek_mla": [("q[:, d_h:][:, half_split]", "q[:, d_h:]")]},
     "caught_by": {"test_deepseek_load_function"}},
    {"id": "ds_permute_inverse",
     "mistake": "重排的方向反了：用了交错到对半的逆置换（d_h^R = 4 时两者相同）",
     "edits": {"load_deepseek_mla": [("half_split = torch.cat([torch.arange(0, d_r, 2), torch.arange(1, d_r, 2)]).to(wq.device)",
                                      "half_split = torch.cat([torch.arange(0, d_r, 2), torch.arange(1, d_r, 2)]).argsort().to(wq.device)")]},
     "caught_by": _DEEPSEEK_ALL},
    {"id": "ds_wkv_b_halves",
     "mistake": "把按头打包的 wkv_b 当成前一半全是键、后一半全是值",
     "edits": {"load_deepseek_mla": [("mla.W_uk.weight.copy_(kv_b[:, :d_h].reshape(h * d_h, d_c))", "mla.W_uk.weight.copy_(wkv_b[:h * d_h])"),
                                     ("mla.W_uv.weight.copy_(kv_b[:, d_h:].reshape(h * d_h, d_c))", "mla.W_uv.weight.copy_(wkv_b[h * d_h:])")]},
     "caught_by": _DEEPSEEK_ALL},
    {"id": "ds_wq_halves",
     "mistake": "把按头打包的 wq 当成前 h·d_h 行全是内容查询、后面全是旋转查询",
     "edits": {"load_deepseek_mla": [("mla.W_q.weight.copy_(q[:, :d_h].reshape(h * d_h, D))", "mla.W_q.weight.copy_(wq[:h * d_h])"),
                                     ("mla.W_qr.weight.copy_(q[:, d_h:][:, half_split].reshape(h * d_r, D))",
                                      "mla.W_qr.weight.copy_(wq[h * d_h:].reshape(h, d_r, D)[:, half_split].reshape(h * d_r, D))")]},
     "caught_by": {"test_deepseek_load_function"}},
    {"id": "ds_wkv_a_order",
     "mistake": "wkv_a 的两段取反了：以为旋转键在前、潜向量在后",
     "edits": {"load_deepseek_mla": [("mla.W_dkv.weight.copy_(wkv_a[:d_c])", "mla.W_dkv.weight.copy_(wkv_a[d_r:])"),
                                     ("mla.W_kr.weight.copy_(wkv_a[d_c:][half_split])", "mla.W_kr.weight.copy_(wkv_a[:d_r][half_split])")]},
     "caught_by": _DEEPSEEK_ALL},
    {"id": "ds_ignores_dtype",
     "mistake": "新模块总是 float32：没有跟随权重的数据类型",
     "edits": {"load_deepseek_mla": [(".to(device=wq.device, dtype=wq.dtype)", ".to(wq.device)")]},
     "caught_by": {"test_deepseek_load_structure"}},
    # ---- question 8: how the SVD factors are split
    {"id": "svd_vh_columns",
     "mistake": "把 Vh 的列当成右奇异向量（torch.linalg.svd 返回的 Vh 每一行才是一个）",
     "edits": {"mha_to_mla_svd": [("mla.W_dkv.weight.copy_(Vh[:r])", "mla.W_dkv.weight.copy_(Vh[:, :r].T)")]},
     "caught_by": _SVD_ALL},
    {"id": "svd_s_twice",
     "mistake": "两个因子各乘了一次奇异值：乘积是 U S² Vᵀ",
     "edits": {"mha_to_mla_svd": [("mla.W_dkv.weight.copy_(Vh[:r])", "mla.W_dkv.weight.copy_(S[:r, None] * Vh[:r])")]},
     "caught_by": _SVD_ALL},
    {"id": "svd_drops_singular_values",
     "mistake": "只用了奇异向量，没有乘奇异值",
     "edits": {"mha_to_mla_svd": [("up = U[:, :r] * S[:r]  # (2D, r)", "up = U[:, :r]")]},
     "caught_by": _SVD_ALL},
]

# ---------------------------------------------------------------------------------------------------------------
# misconceptions (label, hint, slide title of DECK[, another deck]) and their twins: see catalog/a1_scoring.py.
# A hint gives the symptom and a two-line experiment that shows it, and names the slide; never the fix.

_PAIRING, _FREQ = "对半（half-split）：同一个旋转，换一种维度顺序", "$d$ 维：$d/2$ 个平面，各有各的频率"
_TABLE_1, _DECOUPLED, _GQA_SPECIAL = "每个词元缓存多少：DeepSeek-V2 表 1", "解耦 RoPE（decoupled RoPE）", "GQA 是 MLA 的特例"
_ABSORB, _LOW_RANK = "权重吸收：在潜空间里做注意力", "不带 RoPE 的 MLA 是一种 MHA"
_NO_SCALE = ("转换时没有补偿 MLA 多出来的旋转维度 d_h^R", "症状：转换结果的注意力比原模块更平，输出对不上。试一试："
             "对同一个输入分别打印原模块和转换结果第 0 个头的注意力权重（attention.attention_weights[0]），"
             "再比较两者打分时各除以了多少。", _DECOUPLED)
_NO_W_O = "各头的输出拼接后没有经过 W_o"
_W_O_SYMPTOM = ("症状：不给 head_size 时输出的形状对（num_heads·d_h 正好等于 num_hiddens），数值却与参考的全都不同，而且与 W_o 的参数无关。"
                "试一试：`mla = MultiHeadLatentAttention(16, 4, 6, 2, 0.0).eval(); X = torch.randn(1, 3, 16); y = {call}`，"
                "再 `mla.W_o.weight.data *= 2; print({call} / y)`：输出应该全是 2，你的是多少？")
_DEEPSEEK_NAMES = "对照 DeepSeek 的代码：层的名字（DeepSeek-V3 `inference/model.py`，类 `MLA`）"
_POSITION_FROM_ONE = ("解码时把位置从 1 数起（第一个词元的位置是 0）", "症状：只用这一种解码步时输出都对（只差一个整体平移），"
                      "缓存里的旋转键却多转了一个位置，另一种解码步接着用这个缓存就错了。试一试：空缓存放入 1 个词元 x，"
                      "把 cache.rope_keys 与 apply_rope(mla.W_kr(x), torch.tensor([0])) 比较。", "RoPE 与 KV 缓存")
_UNROTATED = ("缓存里存的是没有旋转的键，读出时才旋转", "症状：只用这一种解码步时输出都对，缓存里的旋转键却与按各自位置旋转过的"
              " W_kr x 不同，另一种解码步接着用这个缓存就错了。试一试：放入两个词元后，把 cache.rope_keys[:, 1] 与 mla.W_kr(x) 比较。",
              "RoPE 与 KV 缓存")
_FLOAT32_CACHE = ("缓存的数据类型被改成了 float32", "症状：float32 输入时正确；float16/bfloat16 输入时缓存里的张量变成 float32，"
                  "占的显存翻倍。试一试：用 bfloat16 的输入放入一个词元，打印 cache.latents.dtype。", "MLA 的缓存与解码一步")
_NOT_PERMUTED = ("DeepSeek 的交错旋转行没有换成对半写法的次序", "症状：形状都对、不报错，输出却与 DeepSeek 的不同（d_h^R = 2 时"
                 "恰好正确）。试一试：看第 6 题自查单元格打印的两组内积是否相同；再对一个头的旋转查询做同样的比较。",
                 "两种写法与 DeepSeek 的权重")
_PACKED = ("把按头打包的 DeepSeek 权重当成前后两大块拆分", "症状：只有一个头时正确，多个头时不对。试一试：2 个头时，"
           "在纸上写出 wkv_b 每 d_h 行一块、各块属于哪个头的键或值，对照 model.py 里 wkv_b.view(n_heads, -1, kv_lora_rank) 之后怎样取键和值。",
           _DEEPSEEK_NAMES)
_MORE_MISCONCEPTIONS = {
    "rope_positions_from_zero": ("忽略了参数 positions，总按 0, 1, …, n−1 旋转", "症状：positions 从 0 开始且连续时正确，否则不对。"
                                 "试一试：apply_rope(X, torch.tensor([5, 6])) 与 apply_rope(X, torch.tensor([0, 1])) 应该不同，打印两者比较。",
                                 "RoPE 与 KV 缓存"),
    "mla_head_size_ignored": ("每头维度写死成 num_hiddens // num_heads，忽略了 head_size", "症状：不给 head_size 时正确；给了"
                              "（DeepSeek-V3 每头 128 维，而 num_hiddens / num_heads = 56）时形状就不对。试一试：打印 "
                              "MultiHeadLatentAttention(12, 3, 5, 2, 0.0, head_size=6).W_q.weight.shape。",
                              "`MultiHeadLatentAttention`：七个线性层（都不带偏置，DeepSeek 也不用）"),
    "mla_ignores_valid_lens": ("注意力没有用 valid_lens：填充的词元也参与了加权", "症状：valid_lens 为 None 时正确；给了有效长度时，"
                               "改动有效长度之外的词元，前面的输出也跟着变。试一试：valid_lens=[2]，把第 3 个及以后的词元改成 100，比较前两个输出。",
                               "`MultiHeadLatentAttention`：前向计算"),
    "mla_uk_uv_swapped": ("键和值的上投影用反了：键用了 W_uv，值用了 W_uk", "症状：形状都对，数值不对。试一试：W_qr、W_kr 为零时照第 3 题"
                          "的自查搭一个 W_k = W_uk W_dkv、W_v = W_uv W_dkv 的多头注意力，比较两者；再交换 W_uk 与 W_uv 的权重比较一次。",
                          "多头潜在注意力（MLA）：低秩联合压缩"),
    "mla_rope_before_split": ("旋转查询在拆头之前就旋转了：h 个头被当成一个 h·d_h^R 维的向量配对", "症状：只有一个头时正确，"
                              "多个头时不对。试一试：2 个头、d_h^R = 2，令 W_qr 为单位矩阵，打印位置 1 上两个头的旋转查询，"
                              "两个头应转过同样的角度。", _DECOUPLED),
    "mla_rope_on_content": ("内容部分的查询和键也被旋转了（只该旋转解耦的那一段）", "症状：W_qr、W_kr 为零时输出仍与 "
                            "W_k = W_uk W_dkv 的多头注意力不同。试一试：令 W_qr、W_kr 为零，把同一个词元放在序列的不同位置，"
                            "看它对另一个词元的注意力权重是否改变。", _DECOUPLED),
    "mla_rope_on_latent": ("把 RoPE 作用在了潜向量上", "症状：W_qr、W_kr 为零时输出仍随位置变化，与不带位置的多头注意力不同。"
                           "试一试：令 W_qr、W_kr 为零，比较同一个词元放在位置 0 与位置 3 时的 mla.W_dkv(X) 与你存进缓存的潜向量。",
                           "为什么 RoPE 破坏了吸收"),
    "mla_rope_key_per_head": ("每个头一个旋转键：缓存随头数变大", "症状：参数个数与 W_kr 的形状都对不上。试一试：打印 "
                              "mla.W_kr.weight.shape，再按 mla_cache_bytes 的口径算一算每个词元要缓存几个数。", _DECOUPLED),
    "cache_upcasts_float32": _FLOAT32_CACHE,
    "decode_caches_float32": _FLOAT32_CACHE,
    "decode_no_mask": ("一次放入多个新词元时没有因果掩码", "症状：逐个放入时正确；一次放入几个词元时，前面的词元看到了后面的。"
                       "试一试：同一段提示词一次放入与逐个放入，比较前几个输出。", "`mla_decode_step`"),
    "decode_positions_from_one": _POSITION_FROM_ONE,
    "absorbed_positions_from_one": _POSITION_FROM_ONE,
    "decode_caches_unrotated_key": _UNROTATED,
    "absorbed_caches_unrotated_key": _UNROTATED,
    "absorbed_scale_without_rope_dim": ("缩放因子只用了 d_h，漏了旋转部分的 d_h^R", "症状：与 mla_decode_step 的输出不同，"
                                        "注意力比应有的更尖。试一试：打印你打分之后除以的数，与查询的总宽度（内容加旋转）比较。",
                                        "吸收后的解码一步"),
    "absorbed_scale_from_num_hiddens": ("缩放里的每头维度按 num_hiddens / num_heads 算（头宽不一定是它）", "症状：head_size 等于 "
                                        "num_hiddens / num_heads 时正确，否则注意力的尖锐程度不对。试一试：用 head_size=8 的 "
                                        "MultiHeadLatentAttention(12, 3, 5, 2, 0.0, head_size=8) 比较吸收与不吸收的解码。",
                                        "吸收后的解码一步"),
    "ds_no_permute": _NOT_PERMUTED,
    "ds_query_not_permuted": _NOT_PERMUTED,
    "ds_permute_inverse": ("重排的方向反了：用了交错到对半的逆置换", "症状：d_h^R = 4 时正确（这个置换恰好是自己的逆），"
                           "d_h^R = 6、8 时不对。试一试：d_h^R = 6 时打印 W_kr 的每一行来自 wkv_a 旋转部分的第几行，"
                           "对照对半写法中第 i 对是第 i 与第 i + 3 维。", "对半（half-split）：同一个旋转，换一种维度顺序"),
    "ds_wkv_b_halves": _PACKED,
    "ds_wq_halves": _PACKED,
    "ds_wkv_a_order": ("wkv_a 的两段取反了：潜向量在前、旋转键在后", "症状：形状都对，W_dkv 与 W_kr 的数值不对。试一试：对照 "
                       "model.py 中 torch.split(kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1) 打印你取的行号。", _DEEPSEEK_NAMES),
    "svd_vh_columns": ("把 Vh 的列当成了右奇异向量", "症状：r = num_hiddens 时也不精确。试一试：对一个小矩阵 W 取 U, S, Vh = "
                       "torch.linalg.svd(W)，分别比较 U @ torch.diag(S) @ Vh 与 U @ torch.diag(S) @ Vh.T 和 W 差多少。", _LOW_RANK),
    "svd_s_twice": ("奇异值乘了两次：两个因子各乘了一次", "症状：r = num_hiddens 时也不精确，近似的奇异值是原来的平方。"
                    "试一试：打印 torch.linalg.svdvals(up @ down) 与 torch.linalg.svdvals(W) 的前几个。", _LOW_RANK),
    "svd_drops_singular_values": ("因子里没有乘奇异值", "症状：近似的奇异值全是 1。试一试：打印 torch.linalg.svdvals(up @ down)。",
                                  _LOW_RANK),
}
_MORE_FIXES = {"rope_positions_from_zero": "positions.to(device=X.device", "mla_head_size_ignored": "else head_size",
               "mla_ignores_valid_lens": "values, valid_lens)", "mla_uk_uv_swapped": "transpose_qkv(self.W_uk(latents), h)",
               "mla_rope_before_split": "apply_rope(transpose_qkv(self.W_qr(X), h)",
               "mla_rope_on_content": "apply_rope(transpose_qkv(self.W_qr(X), h)", "mla_rope_on_latent": "latents = self.W_dkv(X)",
               "mla_rope_key_per_head": "repeat_kv(rope_keys, h)",
               "cache_upcasts_float32": "self.latents, self.rope_keys = latents, rope_keys", "decode_caches_float32": _CACHE_APPEND,
               "decode_no_mask": "values, valid_lens)", "decode_positions_from_one": "torch.arange(start, start +",
               "absorbed_positions_from_one": "torch.arange(start, start +", "decode_caches_unrotated_key": _CACHE_APPEND,
               "absorbed_caches_unrotated_key": _CACHE_APPEND, "absorbed_scale_without_rope_dim": "math.sqrt(d_h + q_r.shape[-1])",
               "absorbed_scale_from_num_hiddens": "d_h = W_uk.shape[1]", "ds_no_permute": "[half_split]",
               "ds_query_not_permuted": "[:, half_split]", "ds_permute_inverse": "torch.arange(0, d_r, 2), torch.arange(1, d_r, 2)",
               "ds_wkv_b_halves": "wkv_b.reshape(h, 2 * d_h, d_c)", "ds_wq_halves": "wq.reshape(h, d_h + d_r, D)",
               "ds_wkv_a_order": "wkv_a[:d_c]", "svd_vh_columns": "copy_(Vh[:r])", "svd_s_twice": "copy_(Vh[:r])",
               "svd_drops_singular_values": "U[:, :r] * S[:r]"}
MISCONCEPTIONS = {
    "mla_forgets_W_o": (_NO_W_O, _W_O_SYMPTOM.format(call="mla(X, None)"), "`MultiHeadLatentAttention`：前向计算"),
    "decode_forgets_W_o": (_NO_W_O, _W_O_SYMPTOM.format(call="mla_decode_step(mla, X, LatentCache())"),
                           "`mla_decode_step`"),
    "rope_interleaved": ("RoPE 用了交错配对，而题目规定前后两半配对", "症状：d = 2 时结果正确，d ≥ 4 时就不对。试一试："
                         "对 d = 4 的单位向量 (1, 0, 0, 0) 在位置 1 做旋转，看第 0 维是和第 1 维还是第 2 维一起转。", _PAIRING),
    "rope_freq_without_2": ("RoPE 的频率漏了指数里的 2", "症状：第 0 对正确，后面各对转得太快。试一试：d = 4、base = 100 时，"
                            "(0, 1, 0, 0) 在位置 1 转过的角度应是多少？打印你的结果与 cos、sin 的值对照。", _FREQ),
    "rope_sign": ("RoPE 的旋转方向反了", "症状：相对性质仍然成立，但每个向量都转向了另一边。试一试：d = 2 时把 (1, 0) 放在位置 1，"
                  "结果的第二维应为 sin 1 > 0，看看你的是正还是负。", "RoPE：二维情形"),
    "rope_bf16_angles": ("RoPE 的角度在 bfloat16 中计算", "症状：float32 输入正确，bfloat16 输入在大位置处完全不对。试一试："
                         "打印 torch.tensor(4001.0).bfloat16().item()，再想想位置乘以频率之后角度差了多少弧度。", "角度要用 float32 计算"),
    "bytes_factor_2": ("MLA 的缓存也乘了 2（以为潜向量像键和值一样存两份）", "症状：DeepSeek-V2 每个词元算出 135 KiB 而不是 67.5 KiB。"
                       "试一试：数一数 MLA 解码时每个词元每层存进缓存的张量有几样、各多少个元素。", _TABLE_1),
    "bytes_no_rope_key": ("MLA 的缓存漏了共用的旋转键", "症状：DeepSeek-V2 每个词元算出 60 KiB 而不是 67.5 KiB。"
                          "试一试：看你的 mla_decode_step 每一步往缓存里追加了哪两样，各多少维。", _TABLE_1),
    "mla_scale_without_rope_dim": ("缩放因子只用了 d_h，漏了旋转部分的 d_h^R", "症状：W_qr、W_kr 为零时也与参考结果不同，"
                                   "注意力比应有的更尖。试一试：打印查询的最后一维长度，再算一算你的打分除以了多少。", _DECOUPLED),
    "mla_valid_lens_tiled": ("valid_lens 被平铺，而不是每个样本重复 num_heads 次", "症状：批量为 1 或各样本长度相同时正确，"
                             "长度不同时出错。试一试：valid_lens = [1, 3]、2 个头时，打印你扩展之后的 valid_lens，"
                             "对照 transpose_qkv 之后第 0、1 行各是哪个样本的哪个头。", "`valid_lens` 要按什么顺序复制？",
                             "notebooks/02_multihead_attention.ipynb"),
    "decode_position_zero": ("解码时新词元的位置又从 0 算起", "症状：第一段正确，之后每一步都不对，缓存里的旋转键也不对。试一试："
                             "先放入 3 个词元再放 1 个，打印这一步用的位置，和它在整段序列中的位置比较。", "RoPE 与 KV 缓存"),
    "decode_top_left_causal": ("因果掩码按左上角对齐，忘了缓存里已有的词元", "症状：空缓存时正确，缓存里已有词元后，新词元几乎只看"
                               "最前面的词元。试一试：缓存里已有 3 个词元时再放 2 个，打印 mla.attention.attention_weights 的最后一行，"
                               "看哪些位置的权重是 0。", "`mla_decode_step`"),
    "decode_caches_up_projected": ("把上投影之后的键和值也放进了缓存", "症状：输出都对，缓存却和多头注意力一样大。试一试：解码几步后"
                                   "打印 vars(cache) 里每个张量的形状，按 mla_cache_bytes 的口径算一算每个词元占多少。",
                                   "缓存在哪里才是关键"),
    "absorbed_scale_latent": ("吸收之后按潜向量的维度 d_c + d_h^R 缩放", "症状：d_c = d_h 时正确，否则注意力的尖锐程度不对。试一试："
                              "用同一个缓存分别跑朴素的和吸收的解码，比较两者打分之前除以的数；吸收只改写了乘法的顺序。", _ABSORB),
    "absorbed_reshape_order": ("按头切分 W_uk 的顺序不对，每个头拿到了别的头的行", "症状：只有一个头（或每头一维）时正确。试一试："
                               "取 h = 2、d_h = 2、d_c = 1、W_uk.weight = [[0], [1], [2], [3]]，打印你切出的第 0 个头，"
                               "应是 transpose_qkv 里第 0 个头用的那两行。", _ABSORB),
    "gqa_to_mla_tiled": ("转换时查询头 i 用了键值头 i % g，而不是 i // n_rep", "症状：g = 1 或 g = h 时正确，其余不对。试一试："
                         "h = 4、g = 2 时，把转换结果的 W_uk.weight 画出来（或打印哪些块非零），对照第 3 讲的分组。", _GQA_SPECIAL),
    "gqa_to_mla_no_scale": _NO_SCALE,
    "svd_no_scale": _NO_SCALE,
    "svd_separate": ("对 W_k、W_v 分别做截断 SVD，而不是联合分解", "症状：r = num_hiddens 时也不精确，截断时误差比最优值大。试一试："
                     "打印 torch.linalg.svdvals(torch.cat([W_k, W_v])) 和分别对 W_k、W_v 的奇异值，"
                     "比较同样 r 个维度各能保留多少平方和。", _LOW_RANK),
    "svd_eigh_ascending": ("用 eigh 求奇异向量时保留了最小的特征值方向", "症状：r = num_hiddens 时精确，截断后误差远大于"
                           "截掉的奇异值平方和。试一试：打印 torch.linalg.eigh(W.T @ W).eigenvalues，看它们是怎样排列的。",
                           _LOW_RANK),
}

# the token that tells each misconception's fix apart, as the reference answer writes it: its hint must not contain
# it (tests/test_catalog_schema.py)
_SCALE = "math.sqrt((d_h + qk_rope_head_dim) / d_h)"
MISCONCEPTIONS.update(_MORE_MISCONCEPTIONS)
FIXES = {"rope_interleaved": "X[..., d // 2:]", "rope_freq_without_2": "torch.arange(0, d, 2",
         "rope_sign": "[-X[..., d // 2:]", "rope_bf16_angles": "dtype=torch.float32",
         "bytes_factor_2": "(kv_lora_rank + qk_rope_head_dim) * num_layers",
         "bytes_no_rope_key": "+ qk_rope_head_dim", "mla_scale_without_rope_dim": "d_h + d_h^R",
         "mla_valid_lens_tiled": "repeat_interleave", "decode_position_zero": "torch.arange(start, start + t_new",
         "decode_top_left_causal": "torch.arange(start + 1", "decode_caches_up_projected": "cache.append(mla.W_dkv(x)",
         "absorbed_scale_latent": "math.sqrt(d_h + q_r.shape[-1])", "absorbed_reshape_order": "reshape(h, -1, d_c)",
         "gqa_to_mla_tiled": "repeat_interleave", "gqa_to_mla_no_scale": _SCALE, "svd_no_scale": _SCALE,
         "svd_separate": "torch.cat([mha.W_k.weight, mha.W_v.weight]", "svd_eigh_ascending": "torch.linalg.svd",
         "mla_forgets_W_o": "self.W_o(", "decode_forgets_W_o": "mla.W_o(",
         **_MORE_FIXES}


def _rope_twin(body):
    return '''def apply_rope(X, positions, base=10000):
    d, half = X.shape[-1], X.shape[-1] // 2
''' + body


_MLA_TWIN = '''class MultiHeadLatentAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, kv_lora_rank, qk_rope_head_dim, dropout, head_size=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.head_dim = num_heads, {head_dim}
        self.attention = d2l.DotProductAttention(dropout)
        width = num_heads * self.head_dim
        self.W_q = nn.Linear(num_hiddens, width, bias=False)
        self.W_qr = nn.Linear(num_hiddens, num_heads * qk_rope_head_dim, bias=False)
        self.W_dkv = nn.Linear(num_hiddens, kv_lora_rank, bias=False)
        self.W_uk = nn.Linear(kv_lora_rank, width, bias=False)
        self.W_uv = nn.Linear(kv_lora_rank, width, bias=False)
        self.W_kr = nn.Linear(num_hiddens, {kr_width}, bias=False)
        self.W_o = nn.Linear(width, num_hiddens, bias=False)

    def forward(self, X, valid_lens):
        h = self.num_heads
        pos = torch.arange(X.shape[1], device=X.device)
        c = {c}
        q = {q}
        k = {k}
{body}
        out = self.attention(q, k, {v}, {lens})
        return self.W_o(transpose_output(out, h))'''
_MLA_PARTS = {"head_dim": "num_hiddens // num_heads if head_size is None else head_size", "kr_width": "qk_rope_head_dim",
              "c": "self.W_dkv(X)",
              "q": "torch.cat([transpose_qkv(self.W_q(X), h), apply_rope(transpose_qkv(self.W_qr(X), h), pos)], -1)",
              "k": "torch.cat([transpose_qkv(self.W_uk(c), h), apply_rope(self.W_kr(X), pos).repeat_interleave(h, 0)], -1)",
              "v": "transpose_qkv(self.W_uv(c), h)", "lens": "valid_lens",
              "body": "        if valid_lens is not None:\n            valid_lens = valid_lens.repeat_interleave(h, 0)"}


def _mla_twin(**parts):
    """The MultiHeadLatentAttention twins' template with some parts written the mistaken way."""
    return _MLA_TWIN.format(**{**_MLA_PARTS, **parts})

_HF_DECODE_TWIN = '''def mla_decode_step(mla, x, cache):
    bsz, q_len, _ = x.size()
    past = 0 if cache.latents is None else cache.latents.shape[1]
    position_ids = {positions}
    q_nope = mla.W_q(x).view(bsz, q_len, mla.num_heads, -1).transpose(1, 2)
    q_pe = apply_rope(mla.W_qr(x).view(bsz, q_len, mla.num_heads, -1).transpose(1, 2), position_ids)
    compressed_kv, k_pe = cache.append(mla.W_dkv(x), apply_rope(mla.W_kr(x), position_ids))
    kv_len = compressed_kv.shape[1]
    k_nope = mla.W_uk(compressed_kv).view(bsz, kv_len, mla.num_heads, -1).transpose(1, 2)
    value_states = mla.W_uv(compressed_kv).view(bsz, kv_len, mla.num_heads, -1).transpose(1, 2)
    query_states = torch.cat([q_nope, q_pe], dim=-1)
    key_states = torch.cat([k_nope, k_pe[:, None].expand(-1, mla.num_heads, -1, -1)], dim=-1)
    attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * query_states.shape[-1] ** -0.5
    keep = {keep}
    attn_weights = attn_weights.masked_fill(~keep, torch.finfo(attn_weights.dtype).min)
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    return mla.W_o(attn_output.transpose(1, 2).reshape(bsz, q_len, -1))'''
_RIGHT_POSITIONS = "torch.arange(past, past + q_len, device=x.device)"
_RIGHT_KEEP = "torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device).tril(diagonal=past)"
HF_STYLE["mla_decode_step"] = _HF_DECODE_TWIN.format(positions=_RIGHT_POSITIONS, keep=_RIGHT_KEEP)

_GQA_TWIN = '''def gqa_to_mla(gqa, qk_rope_head_dim=2):
    h, g = gqa.num_heads, gqa.num_kv_heads
    D = gqa.W_q.out_features
    d = D // h
    mla = MultiHeadLatentAttention(D, h, 2 * g * d, qk_rope_head_dim, 0.0).to(gqa.W_q.weight)
    state = {{name: torch.zeros_like(value) for name, value in mla.state_dict().items()}}
    state["W_dkv.weight"] = torch.cat([gqa.W_k.weight, gqa.W_v.weight]).detach().clone()
    for i in range(h):
        j = {group}
        for start, name in ((0, "W_uk.weight"), (g * d, "W_uv.weight")):
            state[name][i * d:(i + 1) * d, start + j * d:start + (j + 1) * d] = torch.eye(d)
    state["W_q.weight"] = gqa.W_q.weight.detach() * {scale}
    state["W_o.weight"] = gqa.W_o.weight.detach().clone()
    mla.load_state_dict(state)
    return mla'''

_SVD_TWIN = '''def mha_to_mla_svd(mha, kv_lora_rank, qk_rope_head_dim=2):
    h, D, r = mha.num_heads, mha.W_q.out_features, kv_lora_rank
    mla = MultiHeadLatentAttention(D, h, r, qk_rope_head_dim, 0.0).to(mha.W_q.weight)
    W = torch.cat([mha.W_k.weight, mha.W_v.weight]).detach().double()
{factor}
    state = {{name: torch.zeros_like(value) for name, value in mla.state_dict().items()}}
    state["W_dkv.weight"], state["W_uk.weight"], state["W_uv.weight"] = down, up[:D], up[D:]
    state["W_q.weight"] = mha.W_q.weight.detach() * {scale}
    state["W_o.weight"] = mha.W_o.weight.detach().clone()
    mla.load_state_dict(state)
    return mla'''
_JOINT = '''    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    down, up = S[:r, None] * Vh[:r], U[:, :r]'''
_SCALE = "math.sqrt(1 + qk_rope_head_dim / (D // h))"

TWINS = {
    "rope_interleaved": {"apply_rope": _rope_twin('''    freqs = 1.0 / (base ** (torch.arange(0, d, 2, device=X.device)[:half].float() / d))
    angles = torch.outer(positions.to(X.device).float(), freqs)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)  # 与 Meta 的 Llama 代码相同
    x = torch.view_as_complex(X.float().reshape(*X.shape[:-1], half, 2))
    return torch.view_as_real(x * freqs_cis).flatten(-2).to(X.dtype)''')},
    "rope_freq_without_2": {"apply_rope": _rope_twin('''    i = torch.arange(half, device=X.device, dtype=torch.float32)
    angles = positions.to(X.device).float()[:, None] / base ** (i / d)
    c, s = angles.cos().to(X.dtype), angles.sin().to(X.dtype)
    x1, x2 = X[..., :half], X[..., half:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)''')},
    "rope_sign": {"apply_rope": _rope_twin('''    theta = base ** (-2 * torch.arange(half, device=X.device, dtype=torch.float32) / d)
    angles = positions.to(X.device).float()[:, None] * theta
    c, s = angles.cos().to(X.dtype), angles.sin().to(X.dtype)
    x1, x2 = X[..., :half], X[..., half:]
    return torch.cat([x1 * c + x2 * s, x2 * c - x1 * s], dim=-1)''')},
    "rope_bf16_angles": {"apply_rope": _rope_twin('''    theta = torch.pow(base, -torch.arange(0, d, 2, device=X.device, dtype=X.dtype) / d)
    angles = torch.outer(positions.to(X.device, X.dtype), theta).repeat(1, 2)
    x1, x2 = X.chunk(2, dim=-1)
    return X * angles.cos() + torch.cat((-x2, x1), dim=-1) * angles.sin()''')},
    "bytes_factor_2": {"mla_cache_bytes": '''def mla_cache_bytes(num_layers, kv_lora_rank, qk_rope_head_dim, num_tokens, batch_size=1, bytes_per_element=2):
    per_layer = 2 * (kv_lora_rank + qk_rope_head_dim)  # 键和值各一份
    return per_layer * num_layers * num_tokens * batch_size * bytes_per_element'''},
    "bytes_no_rope_key": {"mla_cache_bytes": '''def mla_cache_bytes(num_layers, kv_lora_rank, qk_rope_head_dim, num_tokens, batch_size=1, bytes_per_element=2):
    elements = num_layers * kv_lora_rank * num_tokens * batch_size  # 每层缓存一个潜向量
    return elements * bytes_per_element'''},
    "mla_scale_without_rope_dim": {"multi_head_latent_attention": _mla_twin(body='''        q = q * math.sqrt(q.shape[-1] / self.head_dim)  # 按内容部分的维度缩放
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, 0)''')},
    "mla_valid_lens_tiled": {"multi_head_latent_attention": _mla_twin(body='''        if valid_lens is not None:
            valid_lens = torch.cat([valid_lens] * h)''')},
    "decode_position_zero": {"mla_decode_step": _HF_DECODE_TWIN.format(
        positions="torch.arange(q_len, device=x.device)", keep=_RIGHT_KEEP)},
    "decode_top_left_causal": {"mla_decode_step": _HF_DECODE_TWIN.format(
        positions=_RIGHT_POSITIONS, keep="torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device).tril()")},
    "mla_forgets_W_o": {"multi_head_latent_attention": _mla_twin().replace(
        "return self.W_o(transpose_output(out, h))", "return out.unflatten(0, (-1, h)).transpose(1, 2).flatten(2)")},
    "decode_forgets_W_o": {"mla_decode_step": _HF_DECODE_TWIN.format(positions=_RIGHT_POSITIONS, keep=_RIGHT_KEEP).replace(
        "return mla.W_o(attn_output.transpose(1, 2).reshape(bsz, q_len, -1))",
        "return attn_output.transpose(1, 2).reshape(bsz, q_len, -1)")},
    "decode_caches_up_projected": {"mla_decode_step": _HF_DECODE_TWIN.format(
        positions=_RIGHT_POSITIONS, keep=_RIGHT_KEEP).replace(
        "    query_states = torch.cat(", "    cache.kv = (k_nope, value_states)  # 省得下一步再上投影\n    query_states = torch.cat(")},
    "absorbed_scale_latent": {"absorbed_decode_step": '''def absorbed_decode_step(mla, x, cache):
    h, B = mla.num_heads, x.shape[0]
    t = 0 if cache.latents is None else cache.latents.shape[1]
    pos = torch.tensor([t], device=x.device)
    d_c = mla.W_uk.weight.shape[1]
    W_uk = mla.W_uk.weight.reshape(h, -1, d_c)
    q_lat = torch.einsum("bhd,hdc->bhc", mla.W_q(x).reshape(B, h, -1), W_uk).reshape(B * h, 1, d_c)
    q_r = apply_rope(transpose_qkv(mla.W_qr(x), h), pos)
    C, R = cache.append(mla.W_dkv(x), apply_rope(mla.W_kr(x), pos))
    keys = torch.cat([repeat_kv(C, h), repeat_kv(R, h)], dim=-1)
    o = mla.attention(torch.cat([q_lat, q_r], dim=-1), keys, repeat_kv(C, h), None)  # 潜空间里的注意力
    out = torch.einsum("bhc,hdc->bhd", o.reshape(B, h, d_c), mla.W_uv.weight.reshape(h, -1, d_c))
    return mla.W_o(out.reshape(B, 1, -1))'''},
    "absorbed_reshape_order": {"absorbed_decode_step": LECTURER["absorbed_decode_step"].replace(
        "W_uk = mla.W_uk.weight.reshape(num_heads, head_size, kv_lora_rank)",
        "W_uk = torch.stack([mla.W_uk.weight[i::num_heads] for i in range(num_heads)])")},
    "gqa_to_mla_tiled": {"gqa_to_mla": _GQA_TWIN.format(group="i % g", scale=_SCALE)},
    "gqa_to_mla_no_scale": {"gqa_to_mla": _GQA_TWIN.format(group="i // (h // g)", scale="1")},
    "svd_no_scale": {"mha_to_mla_svd": _SVD_TWIN.format(factor=_JOINT, scale="1")},
    "svd_separate": {"mha_to_mla_svd": _SVD_TWIN.format(factor='''    blocks = []
    for part, rank in ((W[:D], r // 2), (W[D:], r - r // 2)):
        U, S, Vh = torch.linalg.svd(part, full_matrices=False)
        blocks.append((Vh[:rank], U[:, :rank] * S[:rank]))
    down = torch.cat([blocks[0][0], blocks[1][0]])
    up = torch.block_diag(blocks[0][1], blocks[1][1])''', scale=_SCALE)},
    "svd_eigh_ascending": {"mha_to_mla_svd": _SVD_TWIN.format(factor='''    V = torch.linalg.eigh(W.T @ W).eigenvectors[:, :r]  # 右奇异向量
    down, up = V.T, W @ V''', scale=_SCALE)},
}

# ---- twins of the misconceptions added for issue 40
_CACHE_TWIN = '''class LatentCache:
    def __init__(self):
        self.latents = None
        self.rope_keys = None

    def append(self, latents, rope_keys):
        if self.latents is None:
            new = (latents, rope_keys)
        else:
            new = (torch.cat((self.latents, latents), 1), torch.cat((self.rope_keys, rope_keys), 1))
        self.latents, self.rope_keys = {store}
        return self.latents, self.rope_keys'''
_DEEPSEEK_TWIN = '''def load_deepseek_mla(state_dict, num_heads, qk_nope_head_dim, qk_rope_head_dim):
    h, d, r = num_heads, qk_nope_head_dim, qk_rope_head_dim
    wq, wkv_a = state_dict["wq.weight"], state_dict["wkv_a.weight"]
    wkv_b, wo = state_dict["wkv_b.weight"], state_dict["wo.weight"]
    d_c = wkv_b.shape[1]
    order = {order}  # 交错 → 对半
    rows_q, rows_qr, rows_k, rows_v = [], [], [], []
    for i in range(h):
        q_i, kv_i = wq[i * (d + r):(i + 1) * (d + r)], wkv_b[i * 2 * d:(i + 1) * 2 * d]
        rows_q.append({q_content})
        rows_qr.append({q_rope})
        rows_k.append({k_rows})
        rows_v.append({v_rows})
    mla = MultiHeadLatentAttention(wq.shape[1], h, d_c, r, 0.0, head_size=d).to(wq)
    state = {{"W_q.weight": torch.cat(rows_q), "W_qr.weight": torch.cat(rows_qr), "W_dkv.weight": {dkv},
             "W_kr.weight": {kr}, "W_uk.weight": torch.cat(rows_k), "W_uv.weight": torch.cat(rows_v), "W_o.weight": wo}}
    mla.load_state_dict({{name: weight.clone() for name, weight in state.items()}})
    return mla'''
_DEEPSEEK_PARTS = {"order": "[j for j in range(0, r, 2)] + [j for j in range(1, r, 2)]", "q_content": "q_i[:d]",
                   "q_rope": "q_i[d:][order]", "k_rows": "kv_i[:d]", "v_rows": "kv_i[d:]", "dkv": "wkv_a[:d_c]",
                   "kr": "wkv_a[d_c:][order]"}


def _deepseek_twin(**parts):
    return _DEEPSEEK_TWIN.format(**{**_DEEPSEEK_PARTS, **parts})


_HF_DECODE = _HF_DECODE_TWIN.format(positions=_RIGHT_POSITIONS, keep=_RIGHT_KEEP)
_HF_APPEND = "compressed_kv, k_pe = cache.append(mla.W_dkv(x), apply_rope(mla.W_kr(x), position_ids))"
_LECTURER_APPEND = "c_kv, k_pe = cache.append(mla.W_dkv(x), apply_rope(mla.W_kr(x), positions))"
TWINS.update({
    "rope_positions_from_zero": {"apply_rope": _rope_twin('''    theta = 1.0 / base ** (torch.arange(0, d, 2, device=X.device, dtype=torch.float32) / d)
    m = torch.arange(X.shape[-2], device=X.device, dtype=torch.float32)  # 第 j 行在位置 j
    angles = (m[:, None] * theta).repeat(1, 2)
    x1, x2 = X[..., :half], X[..., half:]
    return X * angles.cos().to(X.dtype) + torch.cat([-x2, x1], -1) * angles.sin().to(X.dtype)''')},
    "mla_head_size_ignored": {"multi_head_latent_attention": _mla_twin(head_dim="num_hiddens // num_heads")},
    "mla_ignores_valid_lens": {"multi_head_latent_attention": _mla_twin(body="        pass  # 有效长度以后再说", lens="None")},
    "mla_uk_uv_swapped": {"multi_head_latent_attention": _mla_twin(
        k="torch.cat([transpose_qkv(self.W_uv(c), h), apply_rope(self.W_kr(X), pos).repeat_interleave(h, 0)], -1)",
        v="transpose_qkv(self.W_uk(c), h)")},
    "mla_rope_before_split": {"multi_head_latent_attention": _mla_twin(
        q="torch.cat([transpose_qkv(self.W_q(X), h), transpose_qkv(apply_rope(self.W_qr(X), pos), h)], -1)")},
    "mla_rope_on_content": {"multi_head_latent_attention": _mla_twin(
        q="apply_rope(torch.cat([transpose_qkv(self.W_q(X), h), transpose_qkv(self.W_qr(X), h)], -1), pos)",
        k="apply_rope(torch.cat([transpose_qkv(self.W_uk(c), h), self.W_kr(X).repeat_interleave(h, 0)], -1), pos)")},
    "mla_rope_on_latent": {"multi_head_latent_attention": _mla_twin(c="apply_rope(self.W_dkv(X), pos)  # 位置也进缓存")},
    "mla_rope_key_per_head": {"multi_head_latent_attention": _mla_twin(
        kr_width="num_heads * qk_rope_head_dim",
        k="torch.cat([transpose_qkv(self.W_uk(c), h), apply_rope(transpose_qkv(self.W_kr(X), h), pos)], -1)")},
    "cache_upcasts_float32": {"latent_cache": _CACHE_TWIN.format(store="new[0].to(torch.float32), new[1].to(torch.float32)")},
    "decode_caches_float32": {"mla_decode_step": _HF_DECODE.replace(
        _HF_APPEND, "compressed_kv, k_pe = cache.append(mla.W_dkv(x).to(torch.float32), "
                    "apply_rope(mla.W_kr(x), position_ids).to(torch.float32))\n"
                    "    compressed_kv, k_pe = compressed_kv.to(x.dtype), k_pe.to(x.dtype)")},
    "decode_no_mask": {"mla_decode_step": _HF_DECODE_TWIN.format(
        positions=_RIGHT_POSITIONS, keep="torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device)")},
    "decode_positions_from_one": {"mla_decode_step": _HF_DECODE_TWIN.format(
        positions="torch.arange(past + 1, past + q_len + 1, device=x.device)", keep=_RIGHT_KEEP)},
    "decode_caches_unrotated_key": {"mla_decode_step": _HF_DECODE.replace(
        _HF_APPEND, "compressed_kv, k_pe = cache.append(mla.W_dkv(x), mla.W_kr(x))\n"
                    "    k_pe = apply_rope(k_pe, torch.arange(k_pe.shape[1], device=x.device))  # 读的时候再转")},
    "absorbed_positions_from_one": {"absorbed_decode_step": LECTURER["absorbed_decode_step"].replace(
        "positions = torch.arange(num_past, num_past + 1, device=x.device)",
        "positions = torch.arange(num_past + 1, num_past + 2, device=x.device)")},
    "absorbed_caches_unrotated_key": {"absorbed_decode_step": LECTURER["absorbed_decode_step"].replace(
        _LECTURER_APPEND, "c_kv, k_pe = cache.append(mla.W_dkv(x), mla.W_kr(x))\n"
                          "    k_pe = apply_rope(k_pe, torch.arange(k_pe.shape[1], device=x.device))")},
    "absorbed_scale_without_rope_dim": {"absorbed_decode_step": LECTURER["absorbed_decode_step"].replace(
        "scores = scores / math.sqrt(head_size + q_pe.shape[-1])", "scores = scores / math.sqrt(head_size)")},
    "absorbed_scale_from_num_hiddens": {"absorbed_decode_step": LECTURER["absorbed_decode_step"].replace(
        "scores = scores / math.sqrt(head_size + q_pe.shape[-1])",
        "scores = scores / math.sqrt(x.shape[-1] // num_heads + q_pe.shape[-1])")},
    "ds_no_permute": {"load_deepseek_mla": _deepseek_twin(order="list(range(r))")},
    "ds_query_not_permuted": {"load_deepseek_mla": _deepseek_twin(q_rope="q_i[d:]")},
    "ds_permute_inverse": {"load_deepseek_mla": _deepseek_twin(
        order="[j // 2 if j % 2 == 0 else r // 2 + j // 2 for j in range(r)]")},
    "ds_wkv_b_halves": {"load_deepseek_mla": _deepseek_twin(k_rows="wkv_b[i * d:(i + 1) * d]",
                                                            v_rows="wkv_b[(h + i) * d:(h + i + 1) * d]")},
    "ds_wq_halves": {"load_deepseek_mla": _deepseek_twin(q_content="wq[i * d:(i + 1) * d]",
                                                         q_rope="wq[h * d + i * r:h * d + (i + 1) * r][order]")},
    "ds_wkv_a_order": {"load_deepseek_mla": _deepseek_twin(dkv="wkv_a[r:]", kr="wkv_a[:r][order]")},
    "svd_vh_columns": {"mha_to_mla_svd": _SVD_TWIN.format(factor='''    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    down = torch.stack([Vh[:, j] for j in range(r)])  # 前 r 个右奇异向量
    up = U[:, :r] * S[:r]''', scale=_SCALE)},
    "svd_s_twice": {"mha_to_mla_svd": _SVD_TWIN.format(factor='''    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    down, up = S[:r, None] * Vh[:r], U[:, :r] * S[:r]''', scale=_SCALE)},
    "svd_drops_singular_values": {"mha_to_mla_svd": _SVD_TWIN.format(factor='''    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    down, up = Vh[:r], U[:, :r]''', scale=_SCALE)},
})
