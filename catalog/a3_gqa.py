"""Catalog of assignment 3 (KV cache and grouped-query attention): correct answers and realistic mistakes.

`LECTURER` is the lecturer's own d2l-zh style code (seed 000's comment style, `repeat` on a new axis, chunks
and loops where the reference reshapes). `ALSO_CORRECT["deck"]` is the code the unit-3 deck teaches, read from
`notebooks/03_mqa_gqa.ipynb` when the catalog is loaded, so that it cannot drift from the deck;
`ALSO_CORRECT["hf_style"]` is written the way Hugging Face transformers writes Llama attention (expand + reshape
`repeat_kv`, 4-D head layout, its own eager attention, `unflatten`). Cells an answer does not cover keep the
source solution. Each variant lists the exact test cells that must lose points (no cascade between questions).
"""

from attncourse.grading.deck_code import deck_definitions

NOTEBOOK = "gqa"

# ---------------------------------------------------------------------------------------------------------------
# the lecturer's code

LECTURER = {
    "repeat_kv": '''#@save
def repeat_kv(X, n_rep):
    """把每个键值头复制n_rep份，与同组的查询头一一对应"""
    # 输入X的形状:(batch_size*num_kv_heads，“键－值”对的个数，num_hiddens/num_heads)
    if n_rep == 1:
        return X
    # 在第1维插入新轴并复制：(batch_size*num_kv_heads，n_rep，“键－值”对的个数，num_hiddens/num_heads)
    X = X.unsqueeze(1).repeat(1, n_rep, 1, 1)
    # 输出X的形状:(batch_size*num_kv_heads*n_rep，“键－值”对的个数，num_hiddens/num_heads)
    return X.reshape(-1, X.shape[2], X.shape[3])''',

    "grouped_query_attention": '''#@save
class GroupedQueryAttention(nn.Module):
    """分组查询注意力"""
    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 num_heads, num_kv_heads, dropout, bias=False, **kwargs):
        super(GroupedQueryAttention, self).__init__(**kwargs)
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.attention = d2l.DotProductAttention(dropout)
        head_size = num_hiddens // num_heads
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_kv_heads * head_size, bias=bias)
        self.W_v = nn.Linear(value_size, num_kv_heads * head_size, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        # queries的形状:(batch_size*num_heads，查询的个数，num_hiddens/num_heads)
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        # keys，values的形状:(batch_size*num_kv_heads，“键－值”对的个数，num_hiddens/num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_kv_heads)
        values = transpose_qkv(self.W_v(values), self.num_kv_heads)
        # 每个键值头复制给同组的num_heads/num_kv_heads个查询头
        keys = repeat_kv(keys, self.num_heads // self.num_kv_heads)
        values = repeat_kv(values, self.num_heads // self.num_kv_heads)
        if valid_lens is not None:
            # 在轴0，将每一项复制num_heads次
            valid_lens = torch.repeat_interleave(
                valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        # output_concat的形状:(batch_size，查询的个数，num_hiddens)
        output_concat = transpose_output(output, self.num_heads)
        return self.W_o(output_concat)''',

    "kv_cache_bytes": '''#@save
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, num_tokens,
                   batch_size=1, bytes_per_element=2):
    """KV缓存的字节数"""
    # 每层、每个词元缓存键和值各num_kv_heads*head_dim个元素
    num_elements = 2 * num_layers * num_kv_heads * head_dim
    return num_elements * num_tokens * batch_size * bytes_per_element''',

    "kv_cache": '''#@save
class KVCache:
    """键值缓存"""
    def __init__(self):
        self.keys = None
        self.values = None

    def append(self, keys, values):
        # keys，values的形状:(batch_size*num_kv_heads，新词元的个数，num_hiddens/num_heads)
        if self.keys is not None:
            keys = torch.cat((self.keys, keys), dim=1)
            values = torch.cat((self.values, values), dim=1)
        self.keys, self.values = keys, values
        return keys, values''',

    "decode_step": '''#@save
def decode_step(gqa, x, cache):
    """自回归解码的一步"""
    # x的形状:(batch_size，1，query_size)
    n_rep = gqa.num_heads // gqa.num_kv_heads
    queries = transpose_qkv(gqa.W_q(x), gqa.num_heads)
    keys = transpose_qkv(gqa.W_k(x), gqa.num_kv_heads)
    values = transpose_qkv(gqa.W_v(x), gqa.num_kv_heads)
    # 缓存里只存num_kv_heads个头
    keys, values = cache.append(keys, values)
    output = gqa.attention(queries, repeat_kv(keys, n_rep),
                           repeat_kv(values, n_rep), None)
    output_concat = transpose_output(output, gqa.num_heads)
    return gqa.W_o(output_concat)''',

    "mha_to_gqa": '''#@save
def mha_to_gqa(mha, num_kv_heads):
    """把多头注意力转换为分组查询注意力：每组键头、值头的投影取平均"""
    num_heads = mha.num_heads
    group_size = num_heads // num_kv_heads
    gqa = GroupedQueryAttention(mha.W_k.in_features, mha.W_q.in_features,
                                mha.W_v.in_features, mha.W_q.out_features,
                                num_heads, num_kv_heads, dropout=0,
                                bias=mha.W_q.bias is not None)
    gqa.to(mha.W_q.weight.device, mha.W_q.weight.dtype)
    gqa.W_q.load_state_dict(mha.W_q.state_dict())
    gqa.W_o.load_state_dict(mha.W_o.state_dict())
    with torch.no_grad():
        for gqa_layer, mha_layer in zip((gqa.W_k, gqa.W_v), (mha.W_k, mha.W_v)):
            # 按头切块，每组group_size块取平均
            heads = mha_layer.weight.chunk(num_heads, dim=0)
            groups = [torch.stack(heads[i * group_size:(i + 1) * group_size]).mean(dim=0)
                      for i in range(num_kv_heads)]
            gqa_layer.weight.copy_(torch.cat(groups, dim=0))
            if mha_layer.bias is not None:
                heads = mha_layer.bias.chunk(num_heads)
                groups = [torch.stack(heads[i * group_size:(i + 1) * group_size]).mean(dim=0)
                          for i in range(num_kv_heads)]
                gqa_layer.bias.copy_(torch.cat(groups))
    return gqa''',

    "gqa_to_mha": '''#@save
def gqa_to_mha(gqa):
    """把分组查询注意力写成多头注意力：每个键值头的投影复制给同组的每个头"""
    num_heads, num_kv_heads = gqa.num_heads, gqa.num_kv_heads
    group_size = num_heads // num_kv_heads
    mha = MultiHeadAttention(gqa.W_k.in_features, gqa.W_q.in_features,
                             gqa.W_v.in_features, gqa.W_q.out_features,
                             num_heads, 0, bias=gqa.W_q.bias is not None)
    mha.to(gqa.W_q.weight.device, gqa.W_q.weight.dtype)
    mha.W_q.load_state_dict(gqa.W_q.state_dict())
    mha.W_o.load_state_dict(gqa.W_o.state_dict())
    with torch.no_grad():
        for mha_layer, gqa_layer in zip((mha.W_k, mha.W_v), (gqa.W_k, gqa.W_v)):
            # 第i个头用第i//group_size个键值头那一块
            heads = gqa_layer.weight.chunk(num_kv_heads, dim=0)
            mha_layer.weight.copy_(torch.cat([heads[i // group_size] for i in range(num_heads)]))
            if gqa_layer.bias is not None:
                heads = gqa_layer.bias.chunk(num_kv_heads)
                mha_layer.bias.copy_(torch.cat([heads[i // group_size] for i in range(num_heads)]))
    return mha''',
}

# ---------------------------------------------------------------------------------------------------------------
# the deck's code, read from the deck

DECK_CELLS = {"repeat_kv": "repeat_kv", "GroupedQueryAttention": "grouped_query_attention",
              "kv_cache_bytes": "kv_cache_bytes", "KVCache": "kv_cache", "decode_step": "decode_step",
              "mha_to_gqa": "mha_to_gqa"}


# ---------------------------------------------------------------------------------------------------------------
# a correct answer in the style of Hugging Face transformers (modeling_llama.py)

HF_STYLE = {
    "repeat_kv": '''def repeat_kv(X, n_rep):
    """同 transformers 的 repeat_kv：expand 出一个新轴再 reshape，不复制内存直到 reshape。"""
    rows, seq_len, head_dim = X.shape
    if n_rep == 1:
        return X
    X = X[:, None, :, :].expand(rows, n_rep, seq_len, head_dim)
    return X.reshape(rows * n_rep, seq_len, head_dim)''',

    "grouped_query_attention": '''class EagerAttention(nn.Module):
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
        self.attention_weights = attn_weights
        attn_weights = F.dropout(attn_weights, p=self.p, training=self.training)
        return torch.matmul(attn_weights, value)


class GroupedQueryAttention(nn.Module):
    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 num_heads, num_kv_heads, dropout, bias=False, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = num_hiddens // num_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.W_q = nn.Linear(query_size, num_heads * self.head_dim, bias=bias)
        self.W_k = nn.Linear(key_size, num_kv_heads * self.head_dim, bias=bias)
        self.W_v = nn.Linear(value_size, num_kv_heads * self.head_dim, bias=bias)
        self.W_o = nn.Linear(num_heads * self.head_dim, num_hiddens, bias=bias)
        self.attention = EagerAttention(dropout)

    def forward(self, queries, keys, values, valid_lens):
        bsz, q_len, _ = queries.shape
        kv_len = keys.shape[1]
        query_states = self.W_q(queries).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.W_k(keys).view(bsz, kv_len, self.num_kv_heads, self.head_dim).transpose(1, 2)
        value_states = self.W_v(values).view(bsz, kv_len, self.num_kv_heads, self.head_dim).transpose(1, 2)
        # (bsz, 头数, 个数, head_dim) -> (bsz*头数, 个数, head_dim)
        query_states = query_states.reshape(bsz * self.num_heads, q_len, self.head_dim)
        key_states = repeat_kv(key_states.reshape(bsz * self.num_kv_heads, kv_len, self.head_dim),
                               self.num_key_value_groups)
        value_states = repeat_kv(value_states.reshape(bsz * self.num_kv_heads, kv_len, self.head_dim),
                                 self.num_key_value_groups)
        keep = None
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(bsz, q_len)
            keep = torch.arange(kv_len, device=queries.device) < lens[:, :, None]
            keep = keep.repeat_interleave(self.num_heads, dim=0)
        attn_output = self.attention(query_states, key_states, value_states, keep)
        attn_output = attn_output.view(bsz, self.num_heads, q_len, self.head_dim).transpose(1, 2)
        return self.W_o(attn_output.reshape(bsz, q_len, -1))''',

    "kv_cache_bytes": '''def kv_cache_bytes(num_layers, num_kv_heads, head_dim, num_tokens, batch_size=1, bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element  # K 与 V
    return per_token * num_tokens * batch_size''',

    "kv_cache": '''class KVCache:
    """只有一层的 DynamicCache：update 叫作 append。"""
    def __init__(self):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def append(self, keys, values):
        if self.keys is None:
            self.keys = keys
            self.values = values
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values''',

    "decode_step": '''def decode_step(gqa, x, cache):
    bsz = x.shape[0]
    num_heads, num_kv_heads = gqa.num_heads, gqa.num_kv_heads
    head_dim = gqa.W_q.out_features // num_heads
    query_states = gqa.W_q(x).view(bsz, 1, num_heads, head_dim).transpose(1, 2)
    key_states = gqa.W_k(x).view(bsz, 1, num_kv_heads, head_dim).transpose(1, 2)
    value_states = gqa.W_v(x).view(bsz, 1, num_kv_heads, head_dim).transpose(1, 2)
    keys, values = cache.append(key_states.reshape(bsz * num_kv_heads, 1, head_dim),
                                value_states.reshape(bsz * num_kv_heads, 1, head_dim))
    # (bsz*num_kv_heads, t, head_dim) -> (bsz, num_heads, t, head_dim)
    groups = num_heads // num_kv_heads
    keys = keys.reshape(bsz, num_kv_heads, 1, -1, head_dim).expand(-1, -1, groups, -1, -1)
    values = values.reshape(bsz, num_kv_heads, 1, -1, head_dim).expand(-1, -1, groups, -1, -1)
    keys = keys.reshape(bsz, num_heads, -1, head_dim)
    values = values.reshape(bsz, num_heads, -1, head_dim)
    attn_weights = torch.matmul(query_states, keys.transpose(2, 3)) * head_dim ** -0.5
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
    attn_output = torch.matmul(attn_weights, values).transpose(1, 2).reshape(bsz, 1, -1)
    return gqa.W_o(attn_output)''',

    "mha_to_gqa": '''import copy


def mha_to_gqa(mha, num_kv_heads):
    head_dim = mha.W_q.out_features // mha.num_heads
    gqa = GroupedQueryAttention(mha.W_k.in_features, mha.W_q.in_features, mha.W_v.in_features,
                                mha.W_q.out_features, mha.num_heads, num_kv_heads, 0.0,
                                bias=mha.W_k.bias is not None).to(mha.W_k.weight)
    gqa.W_q = copy.deepcopy(mha.W_q)
    gqa.W_o = copy.deepcopy(mha.W_o)
    with torch.no_grad():
        for dst, src in ((gqa.W_k, mha.W_k), (gqa.W_v, mha.W_v)):
            dst.weight.copy_(src.weight.unflatten(0, (num_kv_heads, -1, head_dim)).mean(1).flatten(0, 1))
            if src.bias is not None:
                dst.bias.copy_(src.bias.unflatten(0, (num_kv_heads, -1, head_dim)).mean(1).flatten())
    return gqa''',

    "gqa_to_mha": '''def gqa_to_mha(gqa):
    n_rep = gqa.num_heads // gqa.num_kv_heads
    head_dim = gqa.W_q.out_features // gqa.num_heads
    mha = MultiHeadAttention(gqa.W_k.in_features, gqa.W_q.in_features, gqa.W_v.in_features, gqa.W_q.out_features,
                             gqa.num_heads, 0.0, bias=gqa.W_q.bias is not None).to(gqa.W_q.weight)

    def expand(t):
        t = t.unflatten(0, (gqa.num_kv_heads, 1, head_dim))
        return t.expand(-1, n_rep, *t.shape[2:]).flatten(0, 2)

    with torch.no_grad():
        mha.W_q.load_state_dict(gqa.W_q.state_dict())
        mha.W_o.load_state_dict(gqa.W_o.state_dict())
        for dst, src in ((mha.W_k, gqa.W_k), (mha.W_v, gqa.W_v)):
            dst.weight.copy_(expand(src.weight))
            if src.bias is not None:
                dst.bias.copy_(expand(src.bias))
    return mha''',
}

ALSO_CORRECT = {"hf_style": HF_STYLE}
STATIC, STATIC_IN_PLACE, STATIC_LIMITS = "test_static_cache", "test_static_cache_in_place", "test_static_cache_limits"
PAGED, PAGED_BLOCKS, PAGED_LIMITS = "test_paged_cache", "test_paged_blocks", "test_paged_limits"
_PAGED_GATHER = ("self.keys = self.pool.k[self.block_table].transpose(0, 1).flatten(1, 2)[:, :end]\n"
                 "        self.values = self.pool.v[self.block_table].transpose(0, 1).flatten(1, 2)[:, :end]")
_STATIC_HEAD = '''class StaticKVCache:
    def __init__(self, max_len):
        self.max_len, self.length = max_len, 0
        self.k_buffer = self.v_buffer = None
        self.keys = self.values = None

    def append(self, keys, values):
        start, end = self.length, self.length + keys.shape[1]
        if end > self.max_len:
            raise ValueError("放不下")
'''
_DECK = deck_definitions(__file__, "notebooks/03_mqa_gqa.ipynb", DECK_CELLS)
if _DECK:
    ALSO_CORRECT["deck"] = _DECK

# ---------------------------------------------------------------------------------------------------------------
# mistakes

# A student who writes the attention by hand instead of using d2l.DotProductAttention (correct as written here;
# the variants below break one thing in it).
_OWN_ATTENTION = '''class ScaledDotProduct(nn.Module):
    """softmax(Q K^T / sqrt(scale_dim)) V，用 einsum 写。"""
    def __init__(self, dropout, scale_dim):
        super().__init__()
        self.scale_dim = scale_dim
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = torch.einsum("bqd,bkd->bqk", queries, keys) / math.sqrt(self.scale_dim)
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
            keep = torch.arange(keys.shape[1], device=keys.device) < lens[..., None]
            scores = scores.masked_fill(~keep, float("-inf"))
        self.attention_weights = torch.softmax(scores, dim=-1)
        return torch.einsum("bqk,bkd->bqd", self.dropout(self.attention_weights), values)


'''


def _own(*pairs):
    """Edits of the reference GroupedQueryAttention that swap in ScaledDotProduct, then `pairs`."""
    return {"grouped_query_attention": [
        ("class GroupedQueryAttention(nn.Module):", _OWN_ATTENTION + "class GroupedQueryAttention(nn.Module):"),
        ("self.attention = d2l.DotProductAttention(dropout)",
         "self.attention = ScaledDotProduct(dropout, num_hiddens // num_heads)"),
        *pairs]}


# GroupedQueryAttention.forward with the shortcuts the text forbids
_SDPA_FORWARD = '''    def forward(self, queries, keys, values, valid_lens):
        B, nq, nk = queries.shape[0], queries.shape[1], keys.shape[1]
        q = self.W_q(queries).reshape(B, nq, self.num_heads, -1).transpose(1, 2)
        k = self.W_k(keys).reshape(B, nk, self.num_kv_heads, -1).transpose(1, 2)
        v = self.W_v(values).reshape(B, nk, self.num_kv_heads, -1).transpose(1, 2)
        keep = None
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, nq)
            keep = (torch.arange(nk, device=keys.device) < lens[..., None])[:, None]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
        return self.W_o(out.transpose(1, 2).reshape(B, nq, -1))'''
_GQA_FORWARD = '''    def forward(self, queries, keys, values, valid_lens):
        ### BEGIN SOLUTION'''


def _sdpa(*pairs):
    """Edits of the reference GroupedQueryAttention whose forward calls F.scaled_dot_product_attention."""
    return [(_GQA_FORWARD, _SDPA_FORWARD + "\n\n    def old_forward(self, queries, keys, values, valid_lens):\n"
             "        ### BEGIN SOLUTION"), *pairs]


_TORCH_MHA_SHORTCUT = '''        if self.num_kv_heads == self.num_heads and valid_lens is None and self.W_q.bias is None:
            # g = h 时就是多头注意力：直接用 PyTorch 的实现
            torch_mha = nn.MultiheadAttention(self.W_q.out_features, self.num_heads, bias=False, batch_first=True,
                                              kdim=self.W_k.in_features, vdim=self.W_v.in_features).to(queries)
            with torch.no_grad():
                torch_mha.q_proj_weight.copy_(self.W_q.weight)
                torch_mha.k_proj_weight.copy_(self.W_k.weight)
                torch_mha.v_proj_weight.copy_(self.W_v.weight)
                torch_mha.out_proj.weight.copy_(self.W_o.weight)
            return torch_mha(queries, keys, values, need_weights=False)[0]
        n_rep = self.num_heads // self.num_kv_heads'''

_GQA_ALL = {"test_gqa_shapes", "test_gqa_forward", "test_gqa_valid_lens"}
_DECODE_APPEND = ("keys, values = cache.append(transpose_qkv(gqa.W_k(x), gqa.num_kv_heads),\n"
                  "                                transpose_qkv(gqa.W_v(x), gqa.num_kv_heads))")
_DECODE_ATTEND = "output = gqa.attention(queries, repeat_kv(keys, n_rep), repeat_kv(values, n_rep), None)"
_DROP_BIAS_COPY = ("            if old.bias is not None:\n"
                   "                new.bias.copy_({}(old.bias))\n")

# a PagedKVCache written in chunks (a block's free slots at a time); {gather} builds keys and values
_PAGED_CHUNKS = '''class PagedKVCache:
    def __init__(self, pool):
        self.pool = pool
        self.block_table = []
        self.length = 0
        self.keys = self.values = None

    def append(self, keys, values):
        size, t_new = self.pool.block_size, keys.size(1)
        blocks_after = (self.length + t_new + size - 1) // size
        if blocks_after - len(self.block_table) > len(self.pool.free):
            raise ValueError("没有足够的空闲块")
        while len(self.block_table) < blocks_after:
            self.block_table.append(self.pool.allocate())
        done = 0
        while done < t_new:  # 一次写一段：填满当前块的空位
            block, slot = self.block_table[self.length // size], self.length % size
            n = min(size - slot, t_new - done)
            self.pool.k[block, :, slot:slot + n] = keys[:, done:done + n]
            self.pool.v[block, :, slot:slot + n] = values[:, done:done + n]
            done, self.length = done + n, self.length + n
{gather}
        return self.keys, self.values

    def free(self):
        self.pool.release(self.block_table)
        self.block_table, self.length, self.keys, self.values = [], 0, None, None'''

# ... and its blocks gathered with torch.cat along the token axis
_CAT_GATHER = '''\
        self.keys = torch.cat([self.pool.k[b] for b in self.block_table], dim=1)[:, :self.length]
        self.values = torch.cat([self.pool.v[b] for b in self.block_table], dim=1)[:, :self.length]'''

VARIANTS = [
    # ---- question 1: repeat_kv
    {"id": "repeat_tiled",
     "mistake": "repeat_kv 用 repeat 平铺而不是 repeat_interleave：查询头 i 拿到键值头 i % g，批量大于 1 时还串了样本",
     "edits": {"repeat_kv": [("return torch.repeat_interleave(X, repeats=n_rep, dim=0)", "return X.repeat(n_rep, 1, 1)")]},
     "caught_by": {"test_repeat_kv"}},
    {"id": "repeat_token_dim",
     "mistake": "repeat_kv 沿第 1 维（词元维）复制，而不是沿头所在的第 0 维",
     "edits": {"repeat_kv": [("repeats=n_rep, dim=0)", "repeats=n_rep, dim=1)")]},
     "caught_by": {"test_repeat_kv"}},
    # ---- question 2: GroupedQueryAttention
    {"id": "seed001_kv_width",
     "mistake": "照搬一份流传的教程：键值头的维度取 num_hiddens // num_kv_heads，W_k、W_v 与查询一样宽，g < h 时打分的矩阵乘法失败",
     "edits": {"grouped_query_attention": [("num_kv_heads * (num_hiddens // num_heads)",
                                            "num_kv_heads * (num_hiddens // num_kv_heads)")]},
     "caught_by": _GQA_ALL},
    {"id": "gqa_tiles_kv",
     "mistake": "forward 里不调用 repeat_kv，自己用 repeat 平铺键和值",
     "edits": {"grouped_query_attention": [
         ("keys = repeat_kv(transpose_qkv(self.W_k(keys), self.num_kv_heads), n_rep)",
          "keys = transpose_qkv(self.W_k(keys), self.num_kv_heads).repeat(n_rep, 1, 1)"),
         ("values = repeat_kv(transpose_qkv(self.W_v(values), self.num_kv_heads), n_rep)",
          "values = transpose_qkv(self.W_v(values), self.num_kv_heads).repeat(n_rep, 1, 1)")]},
     "caught_by": {"test_gqa_forward", "test_gqa_valid_lens"}},
    {"id": "valid_lens_kv_heads",
     "mistake": "valid_lens 只复制 num_kv_heads 次（以为它跟着键值头走），g < h 时与批量维度对不上",
     "edits": {"grouped_query_attention": [("repeats=self.num_heads, dim=0)", "repeats=self.num_kv_heads, dim=0)")]},
     "caught_by": {"test_gqa_valid_lens"}},
    {"id": "valid_lens_tiled",
     "mistake": "用 repeat 而不是 repeat_interleave 扩展 valid_lens（批量为 1 或长度相同时看不出来）",
     "edits": {"grouped_query_attention": [
         ("valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)",
          "valid_lens = valid_lens.repeat(self.num_heads)")]},
     "caught_by": {"test_gqa_valid_lens"}},
    {"id": "valid_lens_2d_flattened",
     "mistake": "repeat_interleave 没写 dim=0：二维 valid_lens 被展平，只在一维时正确",
     "edits": {"grouped_query_attention": [("repeats=self.num_heads, dim=0)", "repeats=self.num_heads)")]},
     "caught_by": {"test_gqa_valid_lens"}},
    {"id": "gqa_ignores_valid_lens",
     "mistake": "forward 把 None 而不是 valid_lens 交给注意力：从不掩蔽，valid_lens=None 时全对",
     "edits": {"grouped_query_attention": [("output = self.attention(queries, keys, values, valid_lens)",
                                            "output = self.attention(queries, keys, values, None)")]},
     "caught_by": {"test_gqa_valid_lens"}},
    {"id": "valid_lens_2d_query_axis",
     "mistake": "repeat_interleave 写成 dim=-1：一维 valid_lens 正确，二维时沿查询轴复制（每个查询的长度连续重复 num_heads 次）",
     "edits": {"grouped_query_attention": [("repeats=self.num_heads, dim=0)", "repeats=self.num_heads, dim=-1)")]},
     "caught_by": {"test_gqa_valid_lens"}},
    {"id": "gqa_swap_keys_values",
     "mistake": "把键和值交换着交给注意力：attention(queries, values, keys, ...)（键与值是同一个张量时看不出来）",
     "edits": {"grouped_query_attention": [("self.attention(queries, keys, values, valid_lens)",
                                            "self.attention(queries, values, keys, valid_lens)")]},
     "caught_by": {"test_gqa_forward", "test_gqa_valid_lens"}},
    {"id": "gqa_self_attention_only",
     "mistake": "以为是自注意力：键和值也由 queries 投影，传入的 keys、values 没有用上（key_size 与 query_size 不同时报错）",
     "edits": {"grouped_query_attention": [("        queries = transpose_qkv(self.W_q(queries), self.num_heads)\n",
                                            "        keys = values = queries  # 自注意力\n"
                                            "        queries = transpose_qkv(self.W_q(queries), self.num_heads)\n")]},
     "caught_by": _GQA_ALL},
    {"id": "gqa_swap_W_q_W_k",
     "mistake": "forward 中把 W_q 和 W_k 用反了：两者输出维度不同，拆头时报错",
     "edits": {"grouped_query_attention": [
         ("transpose_qkv(self.W_q(queries), self.num_heads)", "transpose_qkv(self.W_k(queries), self.num_heads)"),
         ("transpose_qkv(self.W_k(keys), self.num_kv_heads)", "transpose_qkv(self.W_q(keys), self.num_kv_heads)")]},
     "caught_by": _GQA_ALL},
    {"id": "gqa_sizes_swapped",
     "mistake": "W_q 按 key_size、W_k 按 query_size 构造：两个输入维度对调（两者相等时看不出来）",
     "edits": {"grouped_query_attention": [("nn.Linear(query_size, num_hiddens, bias=bias)", "nn.Linear(key_size, num_hiddens, bias=bias)"),
                                           ("nn.Linear(key_size, kv_hiddens, bias=bias)", "nn.Linear(query_size, kv_hiddens, bias=bias)")]},
     "caught_by": _GQA_ALL},
    {"id": "gqa_forgets_W_o",
     "mistake": "忘了输出投影 W_o，直接返回拼接结果",
     "edits": {"grouped_query_attention": [("return self.W_o(transpose_output(output, self.num_heads))",
                                            "return transpose_output(output, self.num_heads)")]},
     "caught_by": {"test_gqa_forward", "test_gqa_valid_lens"}},
    {"id": "gqa_bias_always_on",
     "mistake": "构造全连接层时没有传 bias=bias，线性层总带偏置",
     "edits": {"grouped_query_attention": [
         ("nn.Linear(query_size, num_hiddens, bias=bias)", "nn.Linear(query_size, num_hiddens)"),
         ("nn.Linear(key_size, kv_hiddens, bias=bias)", "nn.Linear(key_size, kv_hiddens)"),
         ("nn.Linear(value_size, kv_hiddens, bias=bias)", "nn.Linear(value_size, kv_hiddens)"),
         ("nn.Linear(num_hiddens, num_hiddens, bias=bias)", "nn.Linear(num_hiddens, num_hiddens)")]},
     "caught_by": {"test_gqa_shapes"}},
    {"id": "gqa_wo_no_bias",
     "mistake": "W_o 写成 nn.Linear(num_hiddens, num_hiddens, bias=False)，不随 bias 设置（Llama 的写法）：只有参数个数不对，输出仍按模块自己的参数算",
     "edits": {"grouped_query_attention": [("self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)",
                                            "self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=False)")]},
     "caught_by": {"test_gqa_shapes"}},
    {"id": "own_attention_correct",
     "mistake": "（不是错误）自己写缩放点积注意力而不用 d2l.DotProductAttention：应得满分",
     "edits": _own(),
     "caught_by": set()},
    {"id": "scale_by_kv_width",
     "mistake": "自己写的注意力按 sqrt(num_kv_heads*d)（W_k 的输出维度）而不是 sqrt(d) 缩放",
     "edits": _own(("ScaledDotProduct(dropout, num_hiddens // num_heads)", "ScaledDotProduct(dropout, kv_hiddens)")),
     "caught_by": {"test_gqa_forward", "test_gqa_valid_lens"}},
    {"id": "scale_by_num_hiddens",
     "mistake": "自己写的注意力按 sqrt(num_hiddens) 而不是每个头的维度缩放",
     "edits": _own(("ScaledDotProduct(dropout, num_hiddens // num_heads)", "ScaledDotProduct(dropout, num_hiddens)")),
     "caught_by": {"test_gqa_forward", "test_gqa_valid_lens"}},
    {"id": "dropout_ignores_eval",
     "mistake": "自己写的注意力用 F.dropout(x, p) 而不是 nn.Dropout：eval() 下仍在暂退",
     "edits": _own(("self.dropout(self.attention_weights)", "F.dropout(self.attention_weights, self.dropout.p)")),
     "caught_by": {"test_gqa_forward"}},
    {"id": "attention_weights_not_stored",
     "mistake": "自己写的注意力没有把权重存进 self.attention_weights",
     "edits": _own(("self.attention_weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=-1)"),
                   ("self.dropout(self.attention_weights)", "self.dropout(weights)")),
     "caught_by": {"test_gqa_shapes"}},
    {"id": "mask_built_on_cpu",
     "mistake": "自己写的注意力在 forward 中用 torch.arange(n) 在 CPU 上构造掩码（只在 GPU 上出错）",
     "needs_cuda": True,
     "edits": _own(("torch.arange(keys.shape[1], device=keys.device)", "torch.arange(keys.shape[1])")),
     "caught_by": {"test_gqa_valid_lens"}},
    {"id": "gqa_sdpa_enable_gqa",
     "mistake": "用题目禁止的 F.scaled_dot_product_attention(..., enable_gqa=True) 作答",
     "edits": {"grouped_query_attention": _sdpa()},
     "caught_by": _GQA_ALL},
    {"id": "gqa_sdpa_alias",
     "mistake": "给 F.scaled_dot_product_attention 起个别名，自己复制键值头后再调用（不写 enable_gqa）",
     "edits": {"grouped_query_attention": _sdpa(
         ("class GroupedQueryAttention(nn.Module):",
          "attend = F.scaled_dot_product_attention\n\n\nclass GroupedQueryAttention(nn.Module):"),
         ("out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)",
          "n_rep = self.num_heads // self.num_kv_heads\n"
          "        out = attend(q, k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1), attn_mask=keep)"))},
     "caught_by": _GQA_ALL},
    {"id": "gqa_sdpa_wrapped",
     "mistake": "把 torch.nn.functional.scaled_dot_product_attention 包进一个自己的函数，复制键值头后从 forward 调用",
     "edits": {"grouped_query_attention": _sdpa(
         ("class GroupedQueryAttention(nn.Module):",
          "def attend(q, k, v, keep):\n"
          "    n_rep = q.shape[1] // k.shape[1]\n"
          "    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)\n"
          "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)\n\n\n"
          "class GroupedQueryAttention(nn.Module):"),
         ("out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)",
          "out = attend(q, k, v, keep)"))},
     "caught_by": _GQA_ALL},
    {"id": "gqa_torch_mha_shortcut",
     "mistake": "num_kv_heads = num_heads 时改用题目禁止的 nn.MultiheadAttention",
     "edits": {"grouped_query_attention": [("        n_rep = self.num_heads // self.num_kv_heads", _TORCH_MHA_SHORTCUT)]},
     "caught_by": _GQA_ALL},
    # ---- question 3: kv_cache_bytes
    {"id": "bytes_no_factor_2",
     "mistake": "字节数忘了乘 2：只算了键，没算值",
     "edits": {"kv_cache_bytes": [("return 2 * num_layers", "return num_layers")]},
     "caught_by": {"test_kv_cache_bytes"}},
    {"id": "bytes_no_layers",
     "mistake": "字节数忘了乘层数（每一层都有自己的缓存）",
     "edits": {"kv_cache_bytes": [("2 * num_layers * num_kv_heads", "2 * num_kv_heads")]},
     "caught_by": {"test_kv_cache_bytes"}},
    {"id": "bytes_no_batch",
     "mistake": "字节数忘了乘批量大小",
     "edits": {"kv_cache_bytes": [("num_tokens * batch_size * bytes_per_element", "num_tokens * bytes_per_element")]},
     "caught_by": {"test_kv_cache_bytes"}},
    {"id": "bytes_in_kib",
     "mistake": "返回 KiB 而不是字节（除以 1024，得到浮点数）",
     "edits": {"kv_cache_bytes": [("* batch_size * bytes_per_element", "* batch_size * bytes_per_element / 1024")]},
     "caught_by": {"test_kv_cache_bytes"}},
    # ---- question 4: KVCache and decode_step
    {"id": "cache_cat_dim0",
     "mistake": "KVCache 沿第 0 维拼接：把新词元当成了新的头",
     "edits": {"kv_cache": [("torch.cat([self.keys, keys], dim=1)", "torch.cat([self.keys, keys], dim=0)"),
                            ("torch.cat([self.values, values], dim=1)", "torch.cat([self.values, values], dim=0)")]},
     "caught_by": {"test_kv_cache"}},
    {"id": "cache_returns_new_only",
     "mistake": "append 存下了全部内容，却只返回这一步的键和值",
     "edits": {"kv_cache": [("return self.keys, self.values", "return keys, values")]},
     "caught_by": {"test_kv_cache"}},
    {"id": "cache_shared_between_objects",
     "mistake": "缓存的列表放在类属性里：所有 KVCache 对象共用一份",
     "cells": {"kv_cache": '''class KVCache:
    """键值缓存"""
    parts = {"keys": [], "values": []}

    def __init__(self):
        self.keys, self.values = None, None

    def append(self, keys, values):
        self.parts["keys"].append(keys)
        self.parts["values"].append(values)
        self.keys = torch.cat(self.parts["keys"], dim=1)
        self.values = torch.cat(self.parts["values"], dim=1)
        return self.keys, self.values'''},
     "caught_by": {"test_kv_cache"}},
    {"id": "decode_caches_repeated",
     "mistake": "先用 repeat_kv 复制再放进缓存：缓存存了 num_heads 个头，GQA 省下的显存又花掉了（输出仍然正确）",
     "edits": {"decode_step": [
         (_DECODE_APPEND,
          "keys, values = cache.append(repeat_kv(transpose_qkv(gqa.W_k(x), gqa.num_kv_heads), n_rep),\n"
          "                                repeat_kv(transpose_qkv(gqa.W_v(x), gqa.num_kv_heads), n_rep))"),
         (_DECODE_ATTEND, "output = gqa.attention(queries, keys, values, None)")]},
     "caught_by": {"test_decode_cache"}},
    {"id": "decode_caches_inputs",
     "mistake": "缓存里存未投影的输入 x，每一步把全部词元重新投影（输出正确，但没有省下计算）",
     "edits": {"decode_step": [
         (_DECODE_APPEND,
          "inputs, _ = cache.append(x, x)\n"
          "    keys = transpose_qkv(gqa.W_k(inputs), gqa.num_kv_heads)\n"
          "    values = transpose_qkv(gqa.W_v(inputs), gqa.num_kv_heads)")]},
     "caught_by": {"test_decode_cache"}},
    {"id": "decode_caches_before_split",
     "mistake": "缓存里存拆头之前的 W_k(x)、W_v(x)，取出后再拆头（输出正确，缓存的排列与题目规定的不同）",
     "edits": {"decode_step": [
         (_DECODE_APPEND,
          "keys, values = cache.append(gqa.W_k(x), gqa.W_v(x))\n"
          "    keys, values = transpose_qkv(keys, gqa.num_kv_heads), transpose_qkv(values, gqa.num_kv_heads)")]},
     "caught_by": {"test_decode_cache"}},
    {"id": "decode_forgets_W_o",
     "mistake": "decode_step 忘了输出投影 W_o",
     "edits": {"decode_step": [("return gqa.W_o(transpose_output(output, gqa.num_heads))",
                                "return transpose_output(output, gqa.num_heads)")]},
     "caught_by": {"test_decode_step"}},
    {"id": "decode_newest_token_only",
     "mistake": "新词元的查询只看它自己的键和值，没有看缓存中的旧词元",
     "edits": {"decode_step": [(_DECODE_ATTEND,
                                "output = gqa.attention(queries, repeat_kv(keys[:, -1:], n_rep), "
                                "repeat_kv(values[:, -1:], n_rep), None)")]},
     "caught_by": {"test_decode_step"}},
    {"id": "decode_tiles_kv",
     "mistake": "decode_step 里自己用 repeat 平铺缓存中的键和值",
     "edits": {"decode_step": [("repeat_kv(keys, n_rep), repeat_kv(values, n_rep)",
                                "keys.repeat(n_rep, 1, 1), values.repeat(n_rep, 1, 1)")]},
     "caught_by": {"test_decode_step"}},
    {"id": "decode_sdpa_enable_gqa",
     "mistake": "decode_step 用题目禁止的 F.scaled_dot_product_attention(..., enable_gqa=True)",
     "edits": {"decode_step": [
         (_DECODE_ATTEND,
          "B = x.shape[0]\n"
          "    q = queries.reshape(B, gqa.num_heads, 1, -1)\n"
          "    k = keys.reshape(B, gqa.num_kv_heads, keys.shape[1], -1)\n"
          "    v = values.reshape(B, gqa.num_kv_heads, values.shape[1], -1)\n"
          "    output = F.scaled_dot_product_attention(q, k, v, enable_gqa=True).reshape(B * gqa.num_heads, 1, -1)")]},
     "caught_by": {"test_decode_step", "test_decode_cache"}},
    # ---- question 5: mha_to_gqa
    {"id": "pool_strided",
     "mistake": "按间隔而不是相邻分组取平均：第 k 组用了头 k, k+g, k+2g, …",
     "edits": {"mha_to_gqa": [("t.reshape(num_kv_heads, n_rep, d, *t.shape[1:]).mean(dim=1)",
                               "t.reshape(n_rep, num_kv_heads, d, *t.shape[1:]).mean(dim=0)")]},
     "caught_by": {"test_mha_to_gqa"}},
    {"id": "pool_sum",
     "mistake": "组内求和而不是取平均",
     "edits": {"mha_to_gqa": [(".mean(dim=1)", ".sum(dim=1)")]},
     "caught_by": {"test_mha_to_gqa"}},
    {"id": "pool_first_head",
     "mistake": "每组只保留第一个头（不取平均）",
     "edits": {"mha_to_gqa": [(".mean(dim=1)", "[:, 0]")]},
     "caught_by": {"test_mha_to_gqa"}},
    {"id": "pool_drops_bias",
     "mistake": "只对权重取平均，W_k、W_v 的偏置留着随机初始值",
     "edits": {"mha_to_gqa": [(_DROP_BIAS_COPY.format("pool"), "")]},
     "caught_by": {"test_mha_to_gqa"}},
    {"id": "pool_shares_layers",
     "mistake": "W_q、W_o 直接用 mha 的模块而不是复制：两个模型共享参数，继续训练 GQA 会改动原模型",
     "edits": {"mha_to_gqa": [("gqa.W_q.load_state_dict(mha.W_q.state_dict())\n"
                               "        gqa.W_o.load_state_dict(mha.W_o.state_dict())",
                               "gqa.W_q, gqa.W_o = mha.W_q, mha.W_o")]},
     "caught_by": {"test_mha_to_gqa"}},
    {"id": "pool_ignores_dtype",
     "mistake": "新模块留在默认的 float32（和 CPU）上，没有跟随 mha 的数据类型与设备",
     "edits": {"mha_to_gqa": [("    gqa = gqa.to(device=mha.W_q.weight.device, dtype=mha.W_q.weight.dtype)\n", "")]},
     "caught_by": {"test_mha_to_gqa"}},
    # ---- question 6: gqa_to_mha
    {"id": "expand_tiled",
     "mistake": "展开键值头时平铺（repeat）而不是紧挨着复制：头 i 拿到键值头 i % g",
     "edits": {"gqa_to_mha": [("torch.repeat_interleave(blocks, n_rep, dim=0)",
                               "blocks.repeat(n_rep, *[1] * (blocks.dim() - 1))")]},
     "caught_by": {"test_gqa_to_mha"}},
    {"id": "expand_rows",
     "mistake": "对权重的每一行做 repeat_interleave，而不是对每个头的 d 行一整块（d = 1 时看不出来）",
     "edits": {"gqa_to_mha": [("blocks = t.reshape(num_kv_heads, d, *t.shape[1:])\n"
                               "        return torch.repeat_interleave(blocks, n_rep, dim=0).reshape(num_heads * d, *t.shape[1:])",
                               "return torch.repeat_interleave(t, n_rep, dim=0)")]},
     "caught_by": {"test_gqa_to_mha"}},
    {"id": "expand_divided",
     "mistake": "以为展开是平均池化的逆运算，把复制出的每一块除以 n_rep",
     "edits": {"gqa_to_mha": [(".reshape(num_heads * d, *t.shape[1:])", ".reshape(num_heads * d, *t.shape[1:]) / n_rep")]},
     "caught_by": {"test_gqa_to_mha"}},
    {"id": "expand_drops_bias",
     "mistake": "只展开权重，W_k、W_v 的偏置留着随机初始值",
     "edits": {"gqa_to_mha": [(_DROP_BIAS_COPY.format("expand"), "")]},
     "caught_by": {"test_gqa_to_mha"}},
    # ---- question 5, fairness: an attribute of the student's own class is fine (the test tries their class first)
    {"id": "pool_reads_own_head_dim_ok",
     "mistake": "（正确）自己的 GroupedQueryAttention 另存了 self.head_dim，mha_to_gqa 读的是它：题目没有禁止，应得满分",
     "edits": {"grouped_query_attention": [("self.num_heads, self.num_kv_heads = num_heads, num_kv_heads",
                                            "self.num_heads, self.num_kv_heads = num_heads, num_kv_heads\n"
                                            "        self.head_dim = num_hiddens // num_heads")],
               "mha_to_gqa": [("    def pool(t):", "    d = gqa.head_dim\n\n    def pool(t):")]},
     "caught_by": set()},
    # ---- question 7: StaticKVCache
    {"id": "static_cat_realloc",
     "mistake": "StaticKVCache 仍用 torch.cat 拼接：结果对，但每一步都分配新内存、复制整个缓存（max_len 只用来检查长度）",
     "cells": {"static_kv_cache": _STATIC_HEAD + """        if self.k_buffer is None:
            self.k_buffer, self.v_buffer = keys, values
        else:
            self.k_buffer = torch.cat([self.k_buffer, keys], dim=1)
            self.v_buffer = torch.cat([self.v_buffer, values], dim=1)
        self.length = end
        self.keys, self.values = self.k_buffer, self.v_buffer
        return self.keys, self.values"""},
     "caught_by": {STATIC_IN_PLACE}},
    {"id": "static_returns_copies",
     "mistake": "为了“安全”，keys、values 与返回值都用 .clone() 复制了一份：每一步又复制整个缓存",
     "edits": {"static_kv_cache": [("self.k_buffer[:, :end], self.v_buffer[:, :end]",
                                    "self.k_buffer[:, :end].clone(), self.v_buffer[:, :end].clone()")]},
     "caught_by": {STATIC_IN_PLACE}},
    {"id": "static_default_dtype",
     "mistake": "用 torch.zeros(行数, max_len, head_dim) 分配缓冲区：总是 CPU 上的 float32，不跟随键和值的数据类型与设备",
     "edits": {"static_kv_cache": [
         ("keys.new_zeros(keys.shape[0], self.max_len, keys.shape[2])", "torch.zeros(keys.shape[0], self.max_len, keys.shape[2])"),
         ("values.new_zeros(values.shape[0], self.max_len, values.shape[2])",
          "torch.zeros(values.shape[0], self.max_len, values.shape[2])")]},
     "caught_by": {STATIC}},
    {"id": "static_full_rejected",
     "mistake": "容量检查差一：写成 end >= max_len，恰好放满 max_len 个词元也被拒绝",
     "edits": {"static_kv_cache": [("if end > self.max_len:", "if end >= self.max_len:")]},
     "caught_by": {STATIC_LIMITS}},
    {"id": "static_no_limit_check",
     "mistake": "不检查容量：放不下时切片赋值报 RuntimeError（形状不符），不是题目规定的 ValueError",
     "edits": {"static_kv_cache": [("        if end > self.max_len:  # 先检查，再改动：出错时缓存保持原样\n"
                                    "            raise ValueError(f\"缓存最多 {self.max_len} 个词元，已有 {start} 个，放不下再多 {keys.shape[1]} 个\")\n", "")]},
     "caught_by": {STATIC_LIMITS}},
    {"id": "static_length_before_check",
     "mistake": "先把 length 加上新词元数再检查容量：抛出 ValueError 时 length 已经变了，缓存没有保持原样",
     "edits": {"static_kv_cache": [("        start, end = self.length, self.length + keys.shape[1]\n        if end > self.max_len:",
                                    "        start = self.length\n        self.length += keys.shape[1]\n        end = self.length\n"
                                    "        if end > self.max_len:")]},
     "caught_by": {STATIC_LIMITS}},
    {"id": "static_whole_buffer",
     "mistake": "返回整个缓冲区（包括还没写入的空位），注意力也看了全零的键",
     "edits": {"static_kv_cache": [("self.k_buffer[:, :end], self.v_buffer[:, :end]", "self.k_buffer, self.v_buffer")]},
     "caught_by": {STATIC, STATIC_LIMITS}},
    {"id": "static_property_ok",
     "mistake": "（正确）keys、values 写成 @property，缓冲区用 torch.empty 分配，用 narrow(...).copy_() 写入",
     "cells": {"static_kv_cache": """class StaticKVCache:
    def __init__(self, max_len):
        self.max_len = max_len
        self.length = 0
        self.k_buffer = None
        self.v_buffer = None

    @property
    def keys(self):
        return None if self.k_buffer is None else self.k_buffer.narrow(1, 0, self.length)

    @property
    def values(self):
        return None if self.v_buffer is None else self.v_buffer.narrow(1, 0, self.length)

    def append(self, keys, values):
        t_new = keys.shape[1]
        if self.length + t_new > self.max_len:
            raise ValueError("超过 max_len")
        if self.k_buffer is None:
            self.k_buffer = torch.empty(keys.shape[0], self.max_len, keys.shape[2], dtype=keys.dtype, device=keys.device)
            self.v_buffer = torch.empty(values.shape[0], self.max_len, values.shape[2], dtype=values.dtype, device=values.device)
        self.k_buffer.narrow(1, self.length, t_new).copy_(keys)
        self.v_buffer.narrow(1, self.length, t_new).copy_(values)
        self.length += t_new
        return self.keys, self.values"""},
     "caught_by": set()},
    # ---- question 8: PagedKVCache
    {"id": "paged_gather_no_transpose",
     "mistake": "按块表取出各块 (块数, 行数, block_size, head_dim) 后直接 reshape 成 (行数, -1, head_dim)，没有先交换块维与行维：只有一块时看不出来",
     "edits": {"paged_kv_cache": [(_PAGED_GATHER,
                                   "rows, d = keys.shape[0], keys.shape[2]\n"
                                   "        self.keys = self.pool.k[self.block_table].reshape(rows, -1, d)[:, :end]\n"
                                   "        self.values = self.pool.v[self.block_table].reshape(rows, -1, d)[:, :end]")]},
     "caught_by": {PAGED}},
    {"id": "paged_bookkeeping_only",
     "mistake": "块表只用来记账：照样从块池取块，键和值却仍用 torch.cat 存在自己的张量里，块池的显存没有用上",
     "edits": {"paged_kv_cache": [
         ("        for i, p in enumerate(range(self.length, end)):  # 第 p 个词元：块 block_table[p // size] 的第 p % size 个位置\n"
          "            block = self.block_table[p // size]\n"
          "            self.pool.k[block][:, p % size] = keys[:, i]\n"
          "            self.pool.v[block][:, p % size] = values[:, i]\n", ""),
         (_PAGED_GATHER, "self.keys = keys if self.keys is None else torch.cat([self.keys, keys], dim=1)\n"
                         "        self.values = values if self.values is None else torch.cat([self.values, values], dim=1)")]},
     "caught_by": {PAGED_BLOCKS}},
    {"id": "paged_no_precheck",
     "mistake": "不先检查空闲块够不够，直接逐个 pool.allocate()：中途抛出 ValueError 时已经取走的块既没进块表、也没还回块池",
     "edits": {"paged_kv_cache": [
         ("        if needed > len(self.pool.free):  # 先检查，再改动：出错时缓存和块池保持原样\n"
          "            raise ValueError(f\"块池只剩 {len(self.pool.free)} 个空闲块，这次要 {needed} 个\")\n", "")]},
     "caught_by": {PAGED_LIMITS}},
    {"id": "paged_free_keeps_blocks",
     "mistake": "free() 只清空了自己的块表，没有把块还给块池：释放的块再也没人能用",
     "edits": {"paged_kv_cache": [("        self.pool.release(self.block_table)\n", "")]},
     "caught_by": {PAGED, PAGED_LIMITS}},
    {"id": "paged_chunks_ok",
     "mistake": "（正确）一次写满当前块的一段空位而不是逐个词元，用 torch.cat 沿词元维拼起各块",
     "cells": {"paged_kv_cache": _PAGED_CHUNKS.format(gather=_CAT_GATHER)},
     "caught_by": set()},
    {"id": "static_subclass_ok",
     "mistake": "（正确）继承第 4 题的 KVCache（沿用它的 keys、values），缓冲区用 torch.zeros_like 按第一次的键分配",
     "cells": {"static_kv_cache": """class StaticKVCache(KVCache):
    def __init__(self, max_len):
        super().__init__()
        self.max_len, self.length = max_len, 0
        self.k_buffer = self.v_buffer = None

    def append(self, keys, values):
        n = self.length + keys.size(1)
        if n > self.max_len:
            raise ValueError(f"StaticKVCache 已满：max_len={self.max_len}")
        if self.k_buffer is None:
            shape = (keys.size(0), self.max_len, keys.size(2))
            self.k_buffer = torch.zeros(shape, dtype=keys.dtype, device=keys.device)
            self.v_buffer = torch.zeros(shape, dtype=values.dtype, device=values.device)
        self.k_buffer[:, self.length:n].copy_(keys)
        self.v_buffer[:, self.length:n].copy_(values)
        self.length = n
        self.keys, self.values = self.k_buffer[:, :n], self.v_buffer[:, :n]
        return self.keys, self.values"""},
     "caught_by": set()},
]

# ---------------------------------------------------------------------------------------------------------------
# misconceptions (label, hint, slide title of DECK) and their twins: see catalog/a1_scoring.py

DECK = "notebooks/03_mqa_gqa.ipynb"
_CACHE_SIZE, _CONVERSION = "KV 缓存有多大？", "把训练好的 MHA 转换成 GQA"
_TILED = ("键值头被平铺（repeat），而不是让相邻的查询头共用一个",
          "症状：num_kv_heads = 1 或 n_rep = 1 时全对，其余情况下查询头拿到的不是自己那一组的键值头，批量大于 1 时还拿到别的样本的。"
          "试一试：`X = torch.arange(4.).reshape(4, 1, 1)`（批量 2、每个样本 2 个键值头），再 `print(X.repeat(2, 1, 1).flatten())`："
          "样本 0 的 4 个查询头应依次拿到 0, 0, 1, 1，它们拿到了什么？", "用 `repeat` 平铺会错在哪？")
_GQA_FORWARD = "`GroupedQueryAttention` 的前向计算"
_SCALE_HINT = ("症状：形状都对，只有数值不对，注意力权重比参考的更平（分数除以了太大的数）。试一试：在 forward 里加一行 "
               "`print(queries.shape, keys.shape)`，看一个头的查询和键有多长，再与你的缩放因子里的那个维度比一比。")
_NO_W_O = ("各头的输出拼接后没有经过 W_o", "症状：输出的形状对，数值却与参考的全都不同，而且与 W_o 的参数无关。试一试：把模块的 "
           "`W_o.weight` 改成 `2 * torch.eye(num_hiddens)` 再算一次：输出应该变成两倍，你的变了吗？",
           "结构图", "notebooks/02_multihead_attention.ipynb")
_GQA_CLASS, _GQA_PARAMS = "`GroupedQueryAttention` 类", "参数量：$(2 + 2g/h)\\,d^2$"
_DTYPE = "新建的张量或模块停在默认的 float32（和 CPU）上，没有跟随传入的数据类型与设备"
_PREALLOCATED = "实测：预先分配的 KV 缓存"
_BIAS = ("全连接层的偏置没有随 bias 参数设置", "症状：形状和输出都对，只有参数个数差了几个偏置向量。试一试："
         "`print([n for n, _ in GroupedQueryAttention(8, 8, 8, 16, 4, 2, 0.0).named_parameters()])`，再加上 bias=True "
         "打印一次：默认不加偏置，加了时四个全连接层都有，两次各应有几项？", _GQA_PARAMS)
_LEFT_AS_IT_WAS = "放不下时先改动了缓存，再抛出 ValueError"
MISCONCEPTIONS = {
    "repeat_tiled": _TILED,
    "gqa_tiles_kv": _TILED,
    "decode_tiles_kv": _TILED,
    "expand_tiled": _TILED,
    "valid_lens_tiled": ("valid_lens 被平铺，而不是每个样本重复 num_heads 次", "症状：批量为 1、或各样本的有效长度相同时全对，"
                         "有效长度各不相同时出错。试一试：`lens = torch.tensor([2, 5])`，再 `print(lens.repeat(4))`："
                         "transpose_qkv 之后前 4 行是样本 0 的 4 个查询头，它们都应该用 2，拿到的是什么？",
                         "`valid_lens` 要按什么顺序复制？",
                         "notebooks/02_multihead_attention.ipynb"),
    "scale_by_num_hiddens": ("缩放因子用了 num_hiddens，而不是每个头的维度", _SCALE_HINT, _GQA_FORWARD),
    "scale_by_kv_width": ("缩放因子用了键值投影的总宽度，而不是每个头的维度", _SCALE_HINT, _GQA_FORWARD),
    "bytes_no_batch": ("KV 缓存的字节数忘了乘批量大小", "症状：批量为 1 时全对，批量大于 1 时结果不变。试一试："
                       "`print(kv_cache_bytes(32, 32, 128, 1, batch_size=1))`，再把 batch_size 改成 8：8 个样本各有自己的键和值，"
                       "两个数应差几倍？",
                       _CACHE_SIZE),
    "cache_returns_new_only": ("KVCache 只返回了这一步的键和值", "症状：第一步对，之后每一步都只看到最新的词元。试一试："
                               "`c = KVCache(); c.append(torch.zeros(1, 1, 2), torch.zeros(1, 1, 2))`，再 "
                               "`print(c.append(torch.ones(1, 1, 2), torch.ones(1, 1, 2))[0].shape)`：缓存里已有 2 个词元，"
                               "返回的有几个？", "`KVCache` 与 `decode_step`"),
    "decode_caches_repeated": ("缓存里存的是复制之后的键和值", "症状：输出完全正确，只有缓存的检查不过。试一试：解码两步之后 "
                               "`print(cache.keys.shape)`，再算 batch_size*num_kv_heads：缓存的第 0 维是它吗？GQA 省下的显存还在吗？",
                               "GQA 的解码一步"),
    "pool_strided": ("转换时按间隔而不是按相邻的头分组", "症状：num_kv_heads = 1 或 num_heads 时全对，其余情况下组里的头"
                     "与之后用这一组的查询头对不上。试一试：`heads = torch.arange(8.)`（8 个头的编号，g = 2），再 "
                     "`print(heads.reshape(4, 2).mean(0), heads.reshape(2, 4).mean(1))`：查询头 0–3 用键值头 0，"
                     "第 0 组该是哪几个头的平均？", _CONVERSION),
    "static_whole_buffer": ("返回了整个预分配的缓冲区，包括还没写入的空位", "症状：返回的键总有 max_len 个，解码的输出也不对。"
                            "试一试：`c = StaticKVCache(5); k, _ = c.append(torch.ones(1, 2, 3), torch.ones(1, 2, 3))`，再 "
                            "`print(k.shape, k[0, :, 0])`：只放了 2 个词元，注意力会看到几个键？全零的键会分到权重吗？",
                            _PREALLOCATED),
    "repeat_token_dim": ("repeat_kv 沿词元维复制了", "症状：返回值第 1 维（词元数）变成了 n_rep 倍。试一试："
                         "`X = torch.arange(4.).reshape(2, 2, 1)`，再 `print(repeat_kv(X, 2).shape)`：2 个键值头、2 个词元，"
                         "复制给 4 个查询头之后应是 (4, 2, 1)，你的是什么？", "查询头 $i$ 用键值头 `i // n_rep`：`repeat_kv`"),
    "bytes_no_factor_2": ("KV 缓存的字节数只算了键，没算值", "症状：结果正好是正确值的一半。试一试："
                          "`print(kv_cache_bytes(32, 32, 128, 1))`：Llama-2-7B 每个词元占 512 KiB（524288 字节），"
                          "你的是多少？每个词元缓存了哪几样东西？", _CACHE_SIZE),
    "bytes_no_layers": ("KV 缓存的字节数忘了乘层数", "症状：一层的模型全对，层数多时结果不变。试一试："
                        "`print(kv_cache_bytes(1, 8, 128, 1), kv_cache_bytes(80, 8, 128, 1))`：80 层的模型每层都缓存，"
                        "两个数应差几倍？", _CACHE_SIZE),
    "cache_cat_dim0": ("KVCache 沿第 0 维拼接", "症状：追加之后第 0 维（行数）变大，词元数不变。试一试："
                       "`c = KVCache(); c.append(torch.zeros(2, 1, 3), torch.zeros(2, 1, 3))`，再 "
                       "`print(c.append(torch.ones(2, 1, 3), torch.ones(2, 1, 3))[0].shape)`：已有 2 个词元，形状应是 (2, 2, 3)。",
                       "`KVCache` 与 `decode_step`"),
    "pool_sum": ("转换时组内求和，而不是取平均", "症状：g = num_heads 时全对，其余情况下新的 W_k、W_v 正好是应有的 n_rep 倍。"
                 "试一试：`m = MultiHeadAttention(4, 4, 4, 4, 4, 0.0); nn.init.ones_(m.W_k.weight)`，再 "
                 "`print(mha_to_gqa(m, 2).W_k.weight)`：全是 1 的两个头合成一组，结果应是几？", _CONVERSION),
    "paged_gather_no_transpose": (
        "按块取出后直接 reshape，块维与行维的顺序没有调整",
        "症状：只用一个块时键和值都对，用到两个块以上时顺序乱了，还混进别的行的词元。试一试："
        "`x = torch.arange(8).reshape(2, 2, 2)`（块数、行数、每块词元数：x[b, r] 是第 b 块里第 r 行的词元），"
        "再 `print(x.reshape(2, -1)[0])`：第 0 行应是 0, 1, 4, 5，打印出来的是什么？", "逐步看形状",
        "notebooks/02_multihead_attention.ipynb"),
    "gqa_forgets_W_o": _NO_W_O,
    "decode_forgets_W_o": _NO_W_O,
    "gqa_ignores_valid_lens": ("valid_lens 没有用上：注意力看了全部的键", "症状：valid_lens=None 时全对，传入 valid_lens 后"
                               "输出与不传时一模一样。试一试：`gqa = GroupedQueryAttention(8, 8, 8, 8, 4, 2, 0.0).eval(); "
                               "X = torch.randn(2, 3, 8)`，再 `print((gqa(X, X, X, torch.tensor([1, 1])) - gqa(X, X, X, None)).abs().max())`："
                               "有效长度为 1 时每个查询只该看第一个词元，两个输出应该不同，差是多少？", "因果自注意力：整段一次算完"),
    "seed001_kv_width": ("键值投影与查询投影一样宽（每个键值头比查询头宽）", "症状：num_kv_heads = num_heads 时全对；键值头较少时"
                         "W_k、W_v 的形状不对，打分的矩阵乘法报错。试一试：`m = GroupedQueryAttention(8, 8, 8, 64, 8, 2, 0.0)`，"
                         "再 `print(m.W_q.weight.shape, m.W_k.weight.shape)`：一个查询头有几维？键头要与它做点积，"
                         "两个键值头合起来该有几维？", _GQA_CLASS),
    "gqa_bias_always_on": _BIAS,
    "gqa_wo_no_bias": _BIAS,
    "pool_first_head": ("转换时每组只保留了第一个头", "症状：g = num_heads 时全对，其余情况下组里只有一个头的投影留了下来。"
                        "试一试：`m = MultiHeadAttention(4, 4, 4, 4, 4, 0.0); m.W_k.weight.data = torch.arange(4.)[:, None].repeat(1, 4)`"
                        "（头 j 的权重全是 j），再 `print(mha_to_gqa(m, 2).W_k.weight[:, 0])`：第 0 组由头 0、1 合成，"
                        "头 1 的权重算进去了吗？", _CONVERSION),
    "valid_lens_2d_flattened": ("二维 valid_lens（每个查询各有长度）复制时被展平了", "症状：一维 valid_lens 全对，二维 valid_lens "
                                "时报错或结果不对。试一试：`lens = torch.tensor([[1, 2], [3, 4]])`（批量 2，每个样本 2 个查询），"
                                "照你 forward 里的写法把它复制给 3 个头，再打印结果的形状：应是 (6, 2)，每行是一个头的 2 个查询的"
                                "有效长度，你的是什么？", "`valid_lens` 要按什么顺序复制？", "notebooks/02_multihead_attention.ipynb"),
    "dropout_ignores_eval": ("eval() 之后暂退法（dropout）仍在起作用", "症状：dropout = 0 时全对；dropout > 0 时，即使调用了 "
                             "eval()，同一个输入算两次的输出也不一样。试一试：`gqa = GroupedQueryAttention(8, 8, 8, 8, 4, 2, 0.5).eval(); "
                             "X = torch.randn(1, 3, 8)`，再 `print((gqa(X, X, X, None) - gqa(X, X, X, None)).abs().max())`："
                             "评估模式下应是 0，你的是多少？", _GQA_FORWARD),
    "bytes_in_kib": ("KV 缓存的大小返回的不是字节数", "症状：结果正好是正确值的 1/1024，而且是浮点数。试一试："
                     "`print(kv_cache_bytes(32, 32, 128, 1))`：Llama-2-7B 每个词元占 524288 字节（512 KiB），题目要的是哪个数？"
                     "你的是哪个？", _CACHE_SIZE),
    "cache_shared_between_objects": ("所有 KVCache 对象共用一份缓存", "症状：只用一个缓存时全对；再新建一个 KVCache，它一开始就"
                                     "带着前一个缓存的词元（形状不同时拼接报错）。试一试：`a, b = KVCache(), KVCache(); "
                                     "a.append(torch.zeros(1, 1, 2), torch.zeros(1, 1, 2))`，再 "
                                     "`print(b.append(torch.ones(1, 1, 2), torch.ones(1, 1, 2))[0].shape)`：b 只放了 1 个词元，"
                                     "形状应是 (1, 1, 2)，你的是什么？", "`KVCache` 与 `decode_step`"),
    "decode_caches_inputs": ("缓存里存的是投影之前的输入", "症状：decode_step 的输出全对，只有缓存的检查不过：缓存的最后一维是 "
                             "query_size，不是 head_dim。试一试：解码两步之后 `print(cache.keys.shape)`；再数一数：第 t 步要把"
                             "缓存里的 t 个词元各投影一次吗？KV 缓存省下的正是这些计算。", "`decode_step`：只投影新词元"),
    "decode_caches_before_split": ("缓存里存的是拆头之前的键和值", "症状：decode_step 的输出全对，只有缓存的检查不过。试一试："
                                   "解码两步之后 `print(cache.keys.shape)`：题目规定缓存的形状是 (batch_size*num_kv_heads, "
                                   "已有词元数, head_dim)，你的每一维各是多少？", "`KVCache` 与 `decode_step`"),
    "decode_newest_token_only": ("新词元的查询只看了它自己，没有看缓存里的旧词元", "症状：第 1 步对，之后每一步的输出都只取决于"
                                 "当前这个词元。试一试：a、b 是两个不同的 (1, 1, query_size) 张量，`c = KVCache(); decode_step(gqa, a, c); "
                                 "y = decode_step(gqa, b, c)`，再与 `decode_step(gqa, b, KVCache())` 比一比：第二步看得到 a，"
                                 "两个输出应该不同，你的一样吗？", "用 KV 缓存时，第 $t$ 步做什么"),
    "pool_drops_bias": ("转换时只对权重取了平均，偏置没有转换", "症状：bias=False 时全对；bias=True 时新的 W_k、W_v 的偏置与 mha "
                        "无关，每次转换都不一样。试一试：`m = MultiHeadAttention(4, 4, 4, 4, 4, 0.0, bias=True); "
                        "nn.init.ones_(m.W_k.bias)`，再 `print(mha_to_gqa(m, 2).W_k.bias)`：全是 1 的偏置取平均应是几？", _CONVERSION),
    "pool_shares_layers": ("新模块的 W_q、W_o 与 mha 共用同一组参数", "症状：数值全对，但改动新模块的 W_q，原来的 mha 也跟着变："
                           "继续训练 GQA 会改坏原模型。试一试：`m = MultiHeadAttention(4, 4, 4, 4, 4, 0.0); gqa = mha_to_gqa(m, 2)`，"
                           "再 `print(gqa.W_q.weight.data_ptr() == m.W_q.weight.data_ptr())`：两个模型各有自己的参数吗？", _CONVERSION),
    "pool_ignores_dtype": (_DTYPE, "症状：float32 时全对；mha 是 float64（或在 GPU 上）时，转换出来的模块仍是 CPU 上的 float32。"
                           "试一试：`m = MultiHeadAttention(4, 4, 4, 4, 4, 0.0).double()`，再 `print(mha_to_gqa(m, 2).W_k.weight.dtype)`："
                           "应是 torch.float64，你的是什么？", _CONVERSION),
    "static_default_dtype": (_DTYPE, "症状：float32 时全对；放入 float16、bfloat16（或 GPU 上）的键和值之后，取出来的变成了 CPU 上的 "
                             "float32。试一试：`c = StaticKVCache(4); k = torch.ones(1, 1, 2, dtype=torch.float16)`，再 "
                             "`print(c.append(k, k)[0].dtype)`：应是 torch.float16，你的是什么？", _PREALLOCATED),
    "paged_free_keeps_blocks": ("free() 没有把块还给块池", "症状：释放之前全对；free() 之后 pool.free 没有变多，别的缓存取不到这些块。"
                                "试一试：`pool = KVBlockPool(2, 2, rows=1, head_dim=1); c = PagedKVCache(pool); "
                                "c.append(torch.ones(1, 3, 1), torch.ones(1, 3, 1)); c.free()`，再 `print(pool.free)`："
                                "两个块都应回到块池，你的呢？", _PREALLOCATED),
    "expand_rows": ("展开时复制的是一行一行，而不是每个头的整块", "症状：每头 1 维时全对，每头多维时新 W_k 的头里混着不同键值头的行。"
                    "试一试：`W = torch.arange(4.)[:, None]`（2 个键值头、每头 2 行：键值头 0 是第 0、1 行），再 "
                    "`print(torch.repeat_interleave(W, 2, dim=0).flatten())`：头 0、1 都应是 (0, 1)，头 2、3 是 (2, 3)，打印出来的是什么？",
                    "查询头 $i$ 用键值头 `i // n_rep`：`repeat_kv`"),
    "valid_lens_2d_query_axis": ("二维 valid_lens 沿查询轴复制了，而不是沿批量轴", "症状：一维 valid_lens 全对，二维 valid_lens"
                                 "（每个查询各有一个有效长度）时结果不对，却不报错。试一试：`lens = torch.tensor([[1, 5], [2, 4]])`"
                                 "（批量 2，每个样本 2 个查询），照你 forward 里的写法把它复制给 3 个查询头，再 `print(结果.reshape(-1))`："
                                 "transpose_qkv 之后前 3 行是样本 0 的 3 个查询头，每行的 2 个查询依次用 1、5，展平后应以 "
                                 "1, 5, 1, 5, 1, 5 开头，你的是什么？", "`valid_lens` 要按什么顺序复制？",
                                 "notebooks/02_multihead_attention.ipynb"),
    "gqa_swap_keys_values": ("键和值用反了", "症状：形状都对、不报错，键与值是同一个张量时输出也与参考的不同。试一试："
                             "`gqa = GroupedQueryAttention(4, 4, 4, 4, 2, 1, 0.0).eval(); nn.init.zeros_(gqa.W_v.weight)`，再 "
                             "`X = torch.randn(1, 3, 4); print(gqa(X, X, X, None))`：值全是 0，输出应全是 0，你的是吗？", _GQA_FORWARD),
    "gqa_self_attention_only": ("只用查询做了自注意力，传入的键和值没有用上", "症状：查询、键、值是同一个张量时全对；三者不同时"
                                "输出不对，key_size 与 query_size 不同时还报形状错误。试一试：`gqa = GroupedQueryAttention(8, 8, 8, "
                                "8, 4, 2, 0.0).eval()`，再 `gqa(torch.randn(1, 2, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 8), None); "
                                "print(gqa.attention.attention_weights.shape)`：2 个查询、5 个键，形状应是 (4, 2, 5)，你的是什么？",
                                _GQA_FORWARD),
    "gqa_sizes_swapped": ("W_q、W_k 的输入维度对调了", "症状：key_size 等于 query_size 时全对；不等时 W_q、W_k 的权重形状不对。"
                          "试一试：`m = GroupedQueryAttention(12, 10, 8, 64, 8, 2, 0.0)`（键 12 维、查询 10 维），再 "
                          "`print(m.W_q.weight.shape, m.W_k.weight.shape)`：nn.Linear 的权重形状是（输出维度, 输入维度），"
                          "W_q 作用在 10 维的查询上，它的输入维度应是几？", _GQA_CLASS),
    "static_length_before_check": (_LEFT_AS_IT_WAS, "症状：放得下时全对；放不下时确实抛出了 ValueError，但 length 已经变了，"
                                   "缓存没有保持原样。试一试：`c = StaticKVCache(3); k = torch.ones(1, 2, 1); c.append(k, k)`，再 "
                                   "`print(append_error(c, k, k), c.length)`（`append_error` 在可见测试里）：第二次放不下，"
                                   "应打印 ValueError 2，你的是什么？", _PREALLOCATED),
    "paged_no_precheck": (_LEFT_AS_IT_WAS, "症状：空闲块够用时全对；不够时确实抛出了 ValueError，但块池的空闲块已经少了："
                          "取走的块既不在块表里，也没有还回块池。试一试：`pool = KVBlockPool(2, 2, rows=1, head_dim=1); "
                          "c = PagedKVCache(pool); k = torch.ones(1, 5, 1)`，再 `print(append_error(c, k, k), pool.free)`"
                          "（`append_error` 在可见测试里）：5 个词元要 3 块，放不下，块池应仍是 [0, 1]，你的是什么？", _PREALLOCATED),
    "expand_divided": ("以为展开是平均池化的逆运算，复制之后又除了一次", "症状：num_kv_heads = num_heads 时全对，其余情况下新 W_k、W_v "
                       "只有应有的几分之一，输出与 gqa 不同。试一试：`gqa = GroupedQueryAttention(8, 8, 8, 8, 4, 2, 0.0).eval(); "
                       "X = torch.randn(1, 3, 8)`，再 `print((gqa_to_mha(gqa)(X, X, X, None) - gqa(X, X, X, None)).abs().max())`："
                       "新模块的头 i 与 gqa 的查询头 i 算的是同一个点积，差应是 0，你的是多少？", _CONVERSION),
}

# the token that tells each misconception's fix apart: its hint must not contain it (tests/test_catalog_schema.py)
_TILED_FIX = "repeat_interleave"
FIXES = {"repeat_tiled": _TILED_FIX, "gqa_tiles_kv": _TILED_FIX, "decode_tiles_kv": _TILED_FIX, "expand_tiled": _TILED_FIX,
         "valid_lens_tiled": _TILED_FIX, "scale_by_num_hiddens": "/ num_heads", "scale_by_kv_width": "/ num_heads",
         "bytes_no_batch": "* batch_size", "cache_returns_new_only": "return self.keys",
         "decode_caches_repeated": "repeat_kv(keys", "pool_strided": "相邻", "static_whole_buffer": "[:, :",
         "repeat_token_dim": "dim=0", "bytes_no_factor_2": "2 *", "bytes_no_layers": "* num_layers",
         "cache_cat_dim0": "dim=1", "gqa_forgets_W_o": "self.W_o(", "decode_forgets_W_o": "gqa.W_o(",
         "gqa_ignores_valid_lens": "values, valid_lens)", "pool_sum": "mean", "pool_first_head": "mean", "paged_gather_no_transpose": "transpose",
         "seed001_kv_width": "// num_heads", "gqa_bias_always_on": "bias=bias", "gqa_wo_no_bias": "bias=bias",
         "valid_lens_2d_flattened": "dim=0",
         "dropout_ignores_eval": "nn.Dropout", "bytes_in_kib": "/ 1024", "cache_shared_between_objects": "__init__", "decode_caches_inputs": "gqa.W_k(x)",
         "decode_caches_before_split": "transpose_qkv(gqa.W_k", "decode_newest_token_only": "repeat_kv(keys",
         "pool_drops_bias": "bias.copy_", "pool_shares_layers": "load_state_dict", "pool_ignores_dtype": ".to(",
         "static_default_dtype": "new_zeros", "paged_free_keeps_blocks": "release",
         "expand_rows": "reshape(", "expand_divided": "/ n_rep", "valid_lens_2d_query_axis": "dim=0",
         "gqa_swap_keys_values": "queries, keys, values", "gqa_self_attention_only": "W_k(keys)",
         "gqa_sizes_swapped": "Linear(query_size, num_hiddens", "static_length_before_check": "先检查",
         "paged_no_precheck": "先检查"}


def _pooling_twin(reduce):
    return '''def mha_to_gqa(mha, num_kv_heads):
    h = mha.num_heads
    d = mha.W_q.out_features // h
    gqa = GroupedQueryAttention(mha.W_k.in_features, mha.W_q.in_features, mha.W_v.in_features,
                                mha.W_q.out_features, h, num_kv_heads, mha.attention.dropout.p,
                                bias=mha.W_q.bias is not None).to(mha.W_q.weight)
    state = {k: v.clone() for k, v in mha.state_dict().items()}
    for key in ("W_k.weight", "W_k.bias", "W_v.weight", "W_v.bias"):
        if key in state:
            t = state[key]
            blocks = t.reshape(num_kv_heads, h // num_kv_heads, d, *t.shape[1:])
            state[key] = blocks.%s.reshape(num_kv_heads * d, *t.shape[1:])
    gqa.load_state_dict(state, strict=False)
    return gqa''' % reduce  # noqa: UP031 - the template is Python code, full of braces

def _expanding_twin(copies):
    """gqa_to_mha that fills each layer of the new module with `copies` ({t}: the old weight or bias) in a loop."""
    return '''def gqa_to_mha(gqa):
    h, g = gqa.num_heads, gqa.num_kv_heads
    mha = MultiHeadAttention(gqa.W_k.in_features, gqa.W_q.in_features, gqa.W_v.in_features, gqa.W_q.out_features,
                             h, 0.0, bias=gqa.W_q.bias is not None).to(gqa.W_q.weight)
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v", "W_o"):
            new, old = getattr(mha, name), getattr(gqa, name)
            times = h // g if name in ("W_k", "W_v") else 1
            new.weight.copy_(%s)
            if old.bias is not None:
                new.bias.copy_(%s)
    return mha''' % (copies.format(t="old.weight"), copies.format(t="old.bias"))  # noqa: UP031 - braces in the template


_GQA_TWIN = '''class MyAttention(nn.Module):
    def __init__(self, dropout, scale_dim):
        super().__init__()
        self.dropout, self.scale_dim = nn.Dropout(dropout), scale_dim

    def forward(self, queries, keys, values, valid_lens=None):
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(self.scale_dim)
        if valid_lens is not None:
            lens = valid_lens.reshape(valid_lens.shape[0], -1)
            pad = torch.arange(keys.shape[1], device=keys.device) >= lens.unsqueeze(-1)
            scores = scores.masked_fill(pad, torch.finfo(scores.dtype).min)
        self.attention_weights = F.softmax(scores, dim=-1)
        return torch.bmm(self.dropout(self.attention_weights), values)


class GroupedQueryAttention(nn.Module):
    def __init__(self, key_size, query_size, value_size, num_hiddens, num_heads, num_kv_heads, dropout, bias=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        width = num_hiddens // num_heads * num_kv_heads
        self.attention = {attention}
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, width, bias=bias)
        self.W_v = nn.Linear(value_size, width, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        h, g = self.num_heads, self.num_kv_heads
        q = transpose_qkv(self.W_q(queries), h)
        k = transpose_qkv(self.W_k(keys), g)
        v = transpose_qkv(self.W_v(values), g)
{body}
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))'''
_INTERLEAVED = '''        k, v = k.repeat_interleave(h // g, dim=0), v.repeat_interleave(h // g, dim=0)
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)'''
TWINS = {
    "gqa_tiles_kv": {"grouped_query_attention": _GQA_TWIN.format(attention="d2l.DotProductAttention(dropout)", body='''\
        k, v = torch.cat([k] * (h // g)), torch.cat([v] * (h // g))
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)''')},
    "valid_lens_tiled": {"grouped_query_attention": _GQA_TWIN.format(attention="d2l.DotProductAttention(dropout)",
                                                                     body='''\
        k, v = k.repeat_interleave(h // g, dim=0), v.repeat_interleave(h // g, dim=0)
        if valid_lens is not None:
            valid_lens = torch.cat([valid_lens] * h)''')},
    "scale_by_num_hiddens": {"grouped_query_attention": _GQA_TWIN.format(
        attention="MyAttention(dropout, num_hiddens)", body=_INTERLEAVED)},
    "scale_by_kv_width": {"grouped_query_attention": _GQA_TWIN.format(
        attention="MyAttention(dropout, width)", body=_INTERLEAVED)},
    "decode_tiles_kv": {"decode_step": '''def decode_step(gqa, x, cache):
    h, g = gqa.num_heads, gqa.num_kv_heads
    q = transpose_qkv(gqa.W_q(x), h)
    k, v = cache.append(transpose_qkv(gqa.W_k(x), g), transpose_qkv(gqa.W_v(x), g))
    k, v = torch.cat([k] * (h // g)), torch.cat([v] * (h // g))
    return gqa.W_o(transpose_output(gqa.attention(q, k, v, None), h))'''},
    "decode_caches_repeated": {"decode_step": '''def decode_step(gqa, x, cache):
    h, g = gqa.num_heads, gqa.num_kv_heads
    q = transpose_qkv(gqa.W_q(x), h)
    k = transpose_qkv(gqa.W_k(x), g).repeat_interleave(h // g, dim=0)
    v = transpose_qkv(gqa.W_v(x), g).repeat_interleave(h // g, dim=0)
    k, v = cache.append(k, v)  # 缓存里存 num_heads 个头
    return gqa.W_o(transpose_output(gqa.attention(q, k, v, None), h))'''},
    "expand_tiled": {"gqa_to_mha": _expanding_twin("torch.cat([{t}] * times)")},
    "pool_strided": {"mha_to_gqa": '''def mha_to_gqa(mha, num_kv_heads):
    h = mha.num_heads
    d = mha.W_q.out_features // h
    gqa = GroupedQueryAttention(mha.W_k.in_features, mha.W_q.in_features, mha.W_v.in_features,
                                mha.W_q.out_features, h, num_kv_heads, mha.attention.dropout.p,
                                bias=mha.W_q.bias is not None).to(mha.W_q.weight)
    state = {}
    for key, t in mha.state_dict().items():
        if key.startswith(("W_k.", "W_v.")):
            heads = t.split(d)
            t = torch.cat([torch.stack(heads[k::num_kv_heads]).mean(dim=0) for k in range(num_kv_heads)])
        state[key] = t.clone()
    gqa.load_state_dict(state, strict=False)
    return gqa'''},
    "bytes_no_batch": {"kv_cache_bytes": '''def kv_cache_bytes(num_layers, num_kv_heads, head_dim, num_tokens, batch_size=1, bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element  # 每个词元：各层的键和值
    return per_token * num_tokens'''},
    "cache_returns_new_only": {"kv_cache": '''class KVCache:
    def __init__(self):
        self.keys = self.values = None

    def append(self, keys, values):
        self.keys = keys if self.keys is None else torch.cat((self.keys, keys), dim=1)
        self.values = values if self.values is None else torch.cat((self.values, values), dim=1)
        return keys, values'''},
    "static_whole_buffer": {"static_kv_cache": '''class StaticKVCache:
    def __init__(self, max_len):
        self.max_len, self.length = max_len, 0
        self.k_buffer = self.v_buffer = self.keys = self.values = None

    def append(self, keys, values):
        n = keys.shape[1]
        if self.length + n > self.max_len:
            raise ValueError(f"缓存只有 {self.max_len} 个位置")
        if self.k_buffer is None:
            self.k_buffer = torch.zeros(keys.shape[0], self.max_len, keys.shape[2], dtype=keys.dtype,
                                        device=keys.device)
            self.v_buffer = torch.zeros(values.shape[0], self.max_len, values.shape[2], dtype=values.dtype,
                                        device=values.device)
        self.k_buffer[:, self.length:self.length + n] = keys
        self.v_buffer[:, self.length:self.length + n] = values
        self.length += n
        self.keys, self.values = self.k_buffer, self.v_buffer  # 整个缓冲区
        return self.keys, self.values'''},
    "repeat_tiled": {"repeat_kv": '''def repeat_kv(X, n_rep):
    return torch.cat([X] * n_rep, dim=0)'''},
    "repeat_token_dim": {"repeat_kv": '''def repeat_kv(X, n_rep):
    rows, n, head_dim = X.shape
    return X[:, :, None, :].expand(rows, n, n_rep, head_dim).reshape(rows, n * n_rep, head_dim)'''},
    "bytes_no_factor_2": {"kv_cache_bytes": '''def kv_cache_bytes(num_layers, num_kv_heads, head_dim, num_tokens, batch_size=1, bytes_per_element=2):
    elements = num_layers * num_tokens * batch_size * num_kv_heads * head_dim
    return elements * bytes_per_element'''},
    "bytes_no_layers": {"kv_cache_bytes": '''def kv_cache_bytes(num_layers, num_kv_heads, head_dim, num_tokens, batch_size=1, bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element  # 键和值
    return per_token * num_tokens * batch_size'''},
    "cache_cat_dim0": {"kv_cache": '''class KVCache:
    def __init__(self):
        self.keys = self.values = None
        self._k, self._v = [], []

    def append(self, keys, values):
        self._k.append(keys)
        self._v.append(values)
        self.keys, self.values = torch.cat(self._k), torch.cat(self._v)
        return self.keys, self.values'''},
    "paged_gather_no_transpose": {"paged_kv_cache": _PAGED_CHUNKS.format(gather='''\
        rows, d = keys.size(0), keys.size(2)
        self.keys = torch.cat([self.pool.k[b] for b in self.block_table]).view(rows, -1, d)[:, :self.length]
        self.values = torch.cat([self.pool.v[b] for b in self.block_table]).view(rows, -1, d)[:, :self.length]''')},
    "seed001_kv_width": {"grouped_query_attention": _GQA_TWIN.format(
        attention="d2l.DotProductAttention(dropout)", body=_INTERLEAVED).replace(
        "width = num_hiddens // num_heads * num_kv_heads", "width = num_hiddens  # 键值投影与查询投影一样宽")},
    "gqa_bias_always_on": {"grouped_query_attention": _GQA_TWIN.format(
        attention="d2l.DotProductAttention(dropout)", body=_INTERLEAVED).replace(
        """        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, width, bias=bias)
        self.W_v = nn.Linear(value_size, width, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)""",
        """        for name, size, out in (("W_q", query_size, num_hiddens), ("W_k", key_size, width),
                                ("W_v", value_size, width), ("W_o", num_hiddens, num_hiddens)):
            setattr(self, name, nn.Linear(size, out))""")},
    "gqa_wo_no_bias": {"grouped_query_attention": _GQA_TWIN.format(
        attention="d2l.DotProductAttention(dropout)", body=_INTERLEAVED).replace(
        "self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)",
        "self.W_o = nn.Linear(num_hiddens, num_hiddens, False)  # 输出投影不加偏置")},
    "gqa_forgets_W_o": {"grouped_query_attention": _GQA_TWIN.format(attention="d2l.DotProductAttention(dropout)",
                                                                    body=_INTERLEAVED).replace(
        "return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))",
        "out = self.attention(q, k, v, valid_lens)\n        return out.reshape(-1, h, *out.shape[1:]).transpose(1, 2).flatten(2)")},
    "gqa_ignores_valid_lens": {"grouped_query_attention": _GQA_TWIN.format(
        attention="MyAttention(dropout, num_hiddens // num_heads)", body=_INTERLEAVED).replace('''
        if valid_lens is not None:
            lens = valid_lens.reshape(valid_lens.shape[0], -1)
            pad = torch.arange(keys.shape[1], device=keys.device) >= lens.unsqueeze(-1)
            scores = scores.masked_fill(pad, torch.finfo(scores.dtype).min)''', "")},
    "decode_forgets_W_o": {"decode_step": '''def decode_step(gqa, x, cache):
    h, g = gqa.num_heads, gqa.num_kv_heads
    q = transpose_qkv(gqa.W_q(x), h)
    k, v = cache.append(transpose_qkv(gqa.W_k(x), g), transpose_qkv(gqa.W_v(x), g))
    k, v = k.repeat_interleave(h // g, dim=0), v.repeat_interleave(h // g, dim=0)
    out = gqa.attention(q, k, v, None)  # (batch_size*h, 1, head_dim)
    return out.reshape(x.shape[0], h, 1, -1).transpose(1, 2).reshape(x.shape[0], 1, -1)'''},
    "pool_sum": {"mha_to_gqa": _pooling_twin("sum(dim=1)")},
    "pool_first_head": {"mha_to_gqa": _pooling_twin("select(1, 0)")},
    "valid_lens_2d_flattened": {"grouped_query_attention": _GQA_TWIN.format(attention="d2l.DotProductAttention(dropout)",
                                                                            body='''\
        k, v = k.repeat_interleave(h // g, dim=0), v.repeat_interleave(h // g, dim=0)
        if valid_lens is not None:  # 每个样本的有效长度复制 h 份
            valid_lens = valid_lens[:, None].expand(-1, h).reshape(-1)''')},
    "dropout_ignores_eval": {"grouped_query_attention": _GQA_TWIN.format(
        attention="MyAttention(dropout, num_hiddens // num_heads)", body=_INTERLEAVED).replace(
        "self.dropout, self.scale_dim = nn.Dropout(dropout), scale_dim",
        "self.p, self.scale_dim = dropout, scale_dim").replace(
        "torch.bmm(self.dropout(self.attention_weights), values)",
        "torch.bmm(F.dropout(self.attention_weights, p=self.p), values)")},
    "bytes_in_kib": {"kv_cache_bytes": '''def kv_cache_bytes(num_layers, num_kv_heads, head_dim, num_tokens, batch_size=1, bytes_per_element=2):
    kib_per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element / 2 ** 10  # 讲义用 KiB
    return kib_per_token * num_tokens * batch_size'''},
    "cache_shared_between_objects": {"kv_cache": '''_cached_keys, _cached_values = [], []  # 已缓存的键和值


class KVCache:
    def __init__(self):
        self.keys = self.values = None

    def append(self, keys, values):
        _cached_keys.append(keys)
        _cached_values.append(values)
        self.keys, self.values = torch.cat(_cached_keys, dim=1), torch.cat(_cached_values, dim=1)
        return self.keys, self.values'''},
    "decode_caches_inputs": {"decode_step": '''def decode_step(gqa, x, cache):
    h, g = gqa.num_heads, gqa.num_kv_heads
    xs, _ = cache.append(x, x)  # 缓存输入，每一步把全部词元投影一次
    q = transpose_qkv(gqa.W_q(x), h)
    k = transpose_qkv(gqa.W_k(xs), g).repeat_interleave(h // g, dim=0)
    v = transpose_qkv(gqa.W_v(xs), g).repeat_interleave(h // g, dim=0)
    return gqa.W_o(transpose_output(gqa.attention(q, k, v, None), h))'''},
    "decode_caches_before_split": {"decode_step": '''def decode_step(gqa, x, cache):
    h, g, B = gqa.num_heads, gqa.num_kv_heads, x.shape[0]
    k_all, v_all = cache.append(gqa.W_k(x), gqa.W_v(x))  # (batch_size, 已有词元数, num_kv_heads*head_dim)
    d = k_all.shape[-1] // g
    k = k_all.view(B, -1, g, d).permute(0, 2, 1, 3).repeat_interleave(h // g, dim=1).reshape(B * h, -1, d)
    v = v_all.view(B, -1, g, d).permute(0, 2, 1, 3).repeat_interleave(h // g, dim=1).reshape(B * h, -1, d)
    out = gqa.attention(transpose_qkv(gqa.W_q(x), h), k, v, None)
    return gqa.W_o(transpose_output(out, h))'''},
    "decode_newest_token_only": {"decode_step": '''def decode_step(gqa, x, cache):
    h, g = gqa.num_heads, gqa.num_kv_heads
    q = transpose_qkv(gqa.W_q(x), h)
    k_new, v_new = transpose_qkv(gqa.W_k(x), g), transpose_qkv(gqa.W_v(x), g)
    cache.append(k_new, v_new)
    out = gqa.attention(q, k_new.repeat_interleave(h // g, dim=0), v_new.repeat_interleave(h // g, dim=0), None)
    return gqa.W_o(transpose_output(out, h))'''},
    "pool_drops_bias": {"mha_to_gqa": '''def mha_to_gqa(mha, num_kv_heads):
    h = mha.num_heads
    n_rep, d = h // num_kv_heads, mha.W_q.out_features // h
    gqa = GroupedQueryAttention(mha.W_k.in_features, mha.W_q.in_features, mha.W_v.in_features, mha.W_q.out_features,
                                h, num_kv_heads, 0.0, bias=mha.W_q.bias is not None).to(mha.W_q.weight)
    with torch.no_grad():
        for name in ("W_q", "W_o"):
            getattr(gqa, name).load_state_dict(getattr(mha, name).state_dict())
        for name in ("W_k", "W_v"):  # 每组 n_rep 个头的权重取平均
            w = getattr(mha, name).weight
            getattr(gqa, name).weight.copy_(w.unflatten(0, (num_kv_heads, n_rep, d)).mean(1).flatten(0, 1))
    return gqa'''},
    "pool_shares_layers": {"mha_to_gqa": _pooling_twin("mean(dim=1)").replace(
        "    return gqa", "    gqa.W_q, gqa.W_o = mha.W_q, mha.W_o  # 查询和输出的投影不变，直接沿用\n    return gqa")},
    "pool_ignores_dtype": {"mha_to_gqa": _pooling_twin("mean(dim=1)").replace(
        "bias=mha.W_q.bias is not None).to(mha.W_q.weight)", "bias=mha.W_q.bias is not None)")},
    "static_default_dtype": {"static_kv_cache": _STATIC_HEAD + """        if self.k_buffer is None:
            self.k_buffer = torch.zeros(keys.shape[0], self.max_len, keys.shape[2])
            self.v_buffer = torch.zeros_like(self.k_buffer)
        self.k_buffer[:, start:end] = keys
        self.v_buffer[:, start:end] = values
        self.length = end
        self.keys, self.values = self.k_buffer[:, :end], self.v_buffer[:, :end]
        return self.keys, self.values"""},
    "paged_free_keeps_blocks": {"paged_kv_cache": _PAGED_CHUNKS.format(gather=_CAT_GATHER).replace(
        "        self.pool.release(self.block_table)\n", "")},
    "expand_rows": {"gqa_to_mha": _expanding_twin("{t}.repeat_interleave(times, dim=0)")},
    "expand_divided": {"gqa_to_mha": HF_STYLE["gqa_to_mha"].replace(
        "return t.expand(-1, n_rep, *t.shape[2:]).flatten(0, 2)",
        "return (t.expand(-1, n_rep, *t.shape[2:]) / n_rep).flatten(0, 2)  # mha_to_gqa 取平均，反过来复制之后平分")},
    "valid_lens_2d_query_axis": {"grouped_query_attention": _GQA_TWIN.format(attention="d2l.DotProductAttention(dropout)",
                                                                             body='''\
        k, v = k.repeat_interleave(h // g, dim=0), v.repeat_interleave(h // g, dim=0)
        if valid_lens is not None:
            if valid_lens.dim() == 2:  # 每个查询的有效长度复制 h 份
                valid_lens = valid_lens.repeat_interleave(h, dim=1)
            else:
                valid_lens = valid_lens.repeat_interleave(h)''')},
    "gqa_swap_keys_values": {"grouped_query_attention": _GQA_TWIN.format(attention="d2l.DotProductAttention(dropout)",
                                                                         body='''\
        k, v = v.repeat_interleave(h // g, dim=0), k.repeat_interleave(h // g, dim=0)
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)''')},
    "gqa_self_attention_only": {"grouped_query_attention": _GQA_TWIN.format(
        attention="d2l.DotProductAttention(dropout)", body=_INTERLEAVED).replace(
        "k = transpose_qkv(self.W_k(keys), g)\n        v = transpose_qkv(self.W_v(values), g)",
        "k = transpose_qkv(self.W_k(queries), g)  # 自注意力：键和值也来自查询\n        v = transpose_qkv(self.W_v(queries), g)")},
    # the layers built in the reference's order (the tests compare their initial values), each from the other's size
    "gqa_sizes_swapped": {"grouped_query_attention": _GQA_TWIN.format(
        attention="d2l.DotProductAttention(dropout)", body=_INTERLEAVED).replace(
        """        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, width, bias=bias)""", """        self.W_q = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(query_size, width, bias=bias)""")},
    "static_length_before_check": {"static_kv_cache": '''class StaticKVCache:
    def __init__(self, max_len):
        self.max_len = max_len
        self.length = 0
        self.k_buffer = self.v_buffer = self.keys = self.values = None

    def append(self, keys, values):
        old = self.length
        self.length += keys.size(1)  # 先记下新长度
        if self.length > self.max_len:
            raise ValueError(f"放不下：最多 {self.max_len} 个词元")
        if self.k_buffer is None:
            self.k_buffer = keys.new_zeros(keys.size(0), self.max_len, keys.size(2))
            self.v_buffer = values.new_zeros(values.size(0), self.max_len, values.size(2))
        self.k_buffer.narrow(1, old, keys.size(1)).copy_(keys)
        self.v_buffer.narrow(1, old, values.size(1)).copy_(values)
        self.keys, self.values = self.k_buffer[:, :self.length], self.v_buffer[:, :self.length]
        return self.keys, self.values'''},
    # the blocks taken one by one into a list of their own, added to the table once all are there
    "paged_no_precheck": {"paged_kv_cache": _PAGED_CHUNKS.format(gather=_CAT_GATHER).replace('''        if blocks_after - len(self.block_table) > len(self.pool.free):
            raise ValueError("没有足够的空闲块")
        while len(self.block_table) < blocks_after:
            self.block_table.append(self.pool.allocate())''', '''        new_blocks = []
        for _ in range(blocks_after - len(self.block_table)):
            new_blocks.append(self.pool.allocate())  # 块池没有空闲块时，allocate 会抛出 ValueError
        self.block_table.extend(new_blocks)''')},
}
