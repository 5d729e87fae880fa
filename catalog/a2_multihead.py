"""Catalog of assignment 2 (multi-head attention): the lecturer's d2l-zh code, the deck's code and realistic mistakes.

`LECTURER` is the code of the lecturer's deck (seeds 000/002) verbatim; cells it does not cover
(`per_head_weights`, `load_from_torch`, `head_contributions`, the experiment) keep the source solution.
`ALSO_CORRECT["deck"]` is the code the unit-2 deck teaches (`transpose_qkv`, `transpose_output`,
`MultiHeadAttention`), read from `notebooks/02_multihead_attention.ipynb` when the catalog is loaded.
Each variant lists the exact test cells that must lose points (no cascade between exercises); the forbidden
shortcuts (`nn.MultiheadAttention`, `F.scaled_dot_product_attention`, `d2l.MultiHeadAttention`), aliased or
wrapped, lose every test cell of exercise 2 and nothing else.
"""

from attncourse.grading.deck_code import deck_definitions

NOTEBOOK = "multihead"

_SEED_MHA = '''#@save
class MultiHeadAttention(nn.Module):
    """多头注意力"""
    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 num_heads, dropout, bias=False, **kwargs):
        super(MultiHeadAttention, self).__init__(**kwargs)
        self.num_heads = num_heads
        self.attention = d2l.DotProductAttention(dropout)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        # queries，keys，values的形状:
        # (batch_size，查询或者“键－值”对的个数，num_hiddens)
        # valid_lens　的形状:
        # (batch_size，)或(batch_size，查询的个数)
        # 经过变换后，输出的queries，keys，values　的形状:
        # (batch_size*num_heads，查询或者“键－值”对的个数，
        # num_hiddens/num_heads)
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        values = transpose_qkv(self.W_v(values), self.num_heads)

        if valid_lens is not None:
            # 在轴0，将第一项（标量或者矢量）复制num_heads次，
            # 然后如此复制第二项，然后诸如此类。
            valid_lens = torch.repeat_interleave(
                valid_lens, repeats=self.num_heads, dim=0)

        # output的形状:(batch_size*num_heads，查询的个数，
        # num_hiddens/num_heads)
        output = self.attention(queries, keys, values, valid_lens)

        # output_concat的形状:(batch_size，查询的个数，num_hiddens)
        output_concat = transpose_output(output, self.num_heads)
        return self.W_o(output_concat)'''

_SEED_TRANSPOSE_QKV = '''#@save
def transpose_qkv(X, num_heads):
    """为了多注意力头的并行计算而变换形状"""
    # 输入X的形状:(batch_size，查询或者“键－值”对的个数，num_hiddens)
    # 输出X的形状:(batch_size，查询或者“键－值”对的个数，num_heads，
    # num_hiddens/num_heads)
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)

    # 输出X的形状:(batch_size，num_heads，查询或者“键－值”对的个数,
    # num_hiddens/num_heads)
    X = X.permute(0, 2, 1, 3)

    # 最终输出的形状:(batch_size*num_heads,查询或者“键－值”对的个数,
    # num_hiddens/num_heads)
    return X.reshape(-1, X.shape[2], X.shape[3])'''

_SEED_TRANSPOSE_OUTPUT = '''#@save
def transpose_output(X, num_heads):
    """逆转transpose_qkv函数的操作"""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)'''

LECTURER = {
    "transpose_qkv": _SEED_TRANSPOSE_QKV,
    "transpose_output": _SEED_TRANSPOSE_OUTPUT,
    "multihead_attention": _SEED_MHA,
}

ALSO_CORRECT = {}
_DECK = deck_definitions(
    __file__, "notebooks/02_multihead_attention.ipynb",
    {"transpose_qkv": "transpose_qkv", "transpose_output": "transpose_output",
     "MultiHeadAttention": "multihead_attention"})
if _DECK:
    ALSO_CORRECT["deck"] = _DECK

# A student who writes the attention by hand instead of using d2l.DotProductAttention (correct here;
# the variants below break one thing in it).
_MY_ATTENTION = '''class MyDotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        if valid_lens is not None:
            if valid_lens.dim() == 1:
                valid_lens = valid_lens[:, None]
            mask = torch.arange(keys.shape[1], device=scores.device)[None, None, :] < valid_lens[:, :, None]
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        self.attention_weights = F.softmax(scores, dim=-1)
        return torch.bmm(self.dropout(self.attention_weights), values)
'''


def _own(*pairs):
    """Edits of the reference MultiHeadAttention that swap in MyDotProductAttention, then `pairs`."""
    return {"multihead_attention": [
        ("class MultiHeadAttention(nn.Module):", _MY_ATTENTION + "\n\n\nclass MultiHeadAttention(nn.Module):"),
        ("self.attention = d2l.DotProductAttention(dropout)", "self.attention = MyDotProductAttention(dropout)"),
        *pairs]}


# the lecturer's __init__, for answers that keep it and change only forward
_INIT = _SEED_MHA.split("\n\n    def forward")[0].replace("#@save\n", "") + "\n"

# The forbidden shortcuts, each written so that its results are right: only the rule catches them.
_TORCH_WRAPPED = '''def torch_attention(mha, queries, keys, values, valid_lens):
    """把计算交给 nn.MultiheadAttention（参数从 mha 复制过去）"""
    E, H = mha.W_q.out_features, mha.num_heads
    bias = mha.W_q.bias is not None
    twin = nn.MultiheadAttention(E, H, bias=bias, batch_first=True, kdim=mha.W_k.in_features,
                                 vdim=mha.W_v.in_features).to(queries)
    with torch.no_grad():
        if twin.in_proj_weight is not None:
            twin.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        else:
            twin.q_proj_weight.copy_(mha.W_q.weight)
            twin.k_proj_weight.copy_(mha.W_k.weight)
            twin.v_proj_weight.copy_(mha.W_v.weight)
        if bias:
            twin.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
            twin.out_proj.bias.copy_(mha.W_o.bias)
        twin.out_proj.weight.copy_(mha.W_o.weight)
    mask = None
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(-1, queries.shape[1])
        mask = (torch.arange(keys.shape[1], device=keys.device) >= lens[..., None]).repeat_interleave(H, dim=0)
    out, weights = twin.eval()(queries, keys, values, attn_mask=mask, average_attn_weights=False)
    mha.attention.attention_weights = weights.reshape(-1, weights.shape[2], weights.shape[3])
    return out


''' + _INIT + '''
    def forward(self, queries, keys, values, valid_lens):
        return torch_attention(self, queries, keys, values, valid_lens)'''

_SDPA_ALIAS = "attend = F.scaled_dot_product_attention\n\n\n" + _INIT + '''
    def forward(self, queries, keys, values, valid_lens):
        H = self.num_heads
        q = transpose_qkv(self.W_q(queries), H)
        k = transpose_qkv(self.W_k(keys), H)
        v = transpose_qkv(self.W_v(values), H)
        keep = None
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
            keep = torch.arange(k.shape[1], device=k.device) < torch.repeat_interleave(lens, H, dim=0)[..., None]
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        self.attention.attention_weights = F.softmax(scores, dim=-1)
        return self.W_o(transpose_output(attend(q, k, v, attn_mask=keep), H))'''

_D2L_SUBCLASS = '''class MultiHeadAttention(d2l.MultiHeadAttention):
    """借用 d2l 1.0.3 的多头注意力，只换上 d2l-zh 签名要求的全连接层"""
    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 num_heads, dropout, bias=False, **kwargs):
        super().__init__(num_hiddens, num_heads, dropout, bias=bias)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)'''


def _per_head(body):
    """A head_contributions answer that loops over the heads; `body` appends head i's part."""
    return ("def head_contributions(W_o, X, num_heads):\n"
            "    head_dim = X.shape[-1] // num_heads\n"
            "    parts = []\n"
            "    for i in range(num_heads):\n"
            "        cols = slice(i * head_dim, (i + 1) * head_dim)\n"
            f"        {body}\n"
            "    return torch.stack(parts, dim=1)")


SHAPES, VS_TORCH, VALID_LENS = "test_mha_shapes", "test_mha_vs_torch", "test_mha_valid_lens"
KV_SIZES, PARAM_COUNT, HC = "test_mha_kv_sizes", "test_mha_param_count", "test_head_contributions"
GPT2_PARAMS, GPT2_FORWARD = "test_load_gpt2_params", "test_load_gpt2_forward"
_MHA_ALL = {VS_TORCH, VALID_LENS, KV_SIZES}
_EXERCISE_2 = {SHAPES, VS_TORCH, VALID_LENS, KV_SIZES, PARAM_COUNT}
_HC_SPLIT = "X = X.reshape(batch_size, num_queries, num_heads, head_dim).permute(0, 2, 1, 3)"
_HC_W = "W = W_o.weight.reshape(W_o.out_features, num_heads, head_dim).permute(1, 2, 0)"
_GPT2_HEAD = ("def load_gpt2_attention(mha, state_dict, layer):\n"
              "    prefix = f\"h.{layer}.attn.\"\n"
              "    W, b = state_dict[prefix + \"c_attn.weight\"], state_dict[prefix + \"c_attn.bias\"]\n"
              "    d = W.shape[0]\n")
_GPT2_PROJ = "(mha.W_o, state_dict[prefix + \"c_proj.weight\"], state_dict[prefix + \"c_proj.bias\"])"

VARIANTS = [
    # ---- exercise 1: transposes
    {"id": "qkv_reshape_no_permute",
     "mistake": "transpose_qkv 只用 reshape 拆头、没有 permute：形状对，但各头混入了别的位置",
     "edits": {"transpose_qkv": [("    X = X.permute(0, 2, 1, 3)\n", "")]},
     "caught_by": {"test_transpose_qkv"}},
    {"id": "output_reshape_no_permute",
     "mistake": "transpose_output 只用 reshape 合并、没有 permute 回去",
     "edits": {"transpose_output": [("    X = X.permute(0, 2, 1, 3)\n", "")]},
     "caught_by": {"test_transpose_output"}},
    {"id": "qkv_split_sequence",
     "mistake": "transpose_qkv 直接 reshape 成 (batch_size, num_heads, n, head_dim)、没有 permute：每个头拿到的是一段连续的位置，而不是一段特征",
     "edits": {"transpose_qkv": [("X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)\n    X = X.permute(0, 2, 1, 3)\n",
                                  "X = X.reshape(X.shape[0], num_heads, X.shape[1], -1)\n")]},
     "caught_by": {"test_transpose_qkv"}},
    {"id": "output_merge_sequence",
     "mistake": "transpose_output 把 (batch_size, num_heads, n, head_dim) 直接 reshape 成 (batch_size, n, num_hiddens)、没有 permute 回去",
     "edits": {"transpose_output": [("    X = X.permute(0, 2, 1, 3)\n    return X.reshape(X.shape[0], X.shape[1], -1)",
                                     "    return X.reshape(X.shape[0], X.shape[2], -1)")]},
     "caught_by": {"test_transpose_output"}},
    {"id": "output_heads_outermost",
     "mistake": "transpose_output 以为头在批量维的最外层（按 (num_heads, batch_size) 拆分）",
     "edits": {"transpose_output": [
         ("X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])\n    X = X.permute(0, 2, 1, 3)",
          "X = X.reshape(num_heads, -1, X.shape[1], X.shape[2])\n    X = X.permute(1, 2, 0, 3)")]},
     "caught_by": {"test_transpose_output"}},
    # ---- exercise 2: MultiHeadAttention
    {"id": "valid_lens_repeat",
     "mistake": "用 repeat 而不是 repeat_interleave 扩展 valid_lens（批量大小为 1 或长度相同时看不出来）",
     "edits": {"multihead_attention": [
         ("torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)",
          "valid_lens.repeat(self.num_heads)")]},
     "caught_by": {VALID_LENS}},
    {"id": "valid_lens_2d_flattened",
     "mistake": "repeat_interleave 没写 dim=0：二维 valid_lens 被展平，只在一维时正确",
     "edits": {"multihead_attention": [("repeats=self.num_heads, dim=0)", "repeats=self.num_heads)")]},
     "caught_by": {VALID_LENS}},
    {"id": "valid_lens_2d_query_axis",
     "mistake": "repeat_interleave 写成 dim=-1：一维 valid_lens 正确，二维时沿查询轴复制（每个查询的长度连续重复 num_heads 次）",
     "edits": {"multihead_attention": [("repeats=self.num_heads, dim=0)", "repeats=self.num_heads, dim=-1)")]},
     "caught_by": {VALID_LENS}},
    {"id": "mha_ignores_valid_lens",
     "mistake": "复制了 valid_lens 却没有交给注意力：从不掩蔽，valid_lens=None 时全对",
     "edits": {"multihead_attention": [("self.attention(queries, keys, values, valid_lens)",
                                        "self.attention(queries, keys, values, None)")]},
     "caught_by": {VALID_LENS, KV_SIZES}},
    {"id": "valid_lens_none_crash",
     "mistake": "没有处理 valid_lens=None，直接对 None 调用 repeat_interleave",
     "edits": {"multihead_attention": [
         ("        if valid_lens is not None:\n            valid_lens = torch",
          "        if True:\n            valid_lens = torch")]},
     "caught_by": {VS_TORCH, VALID_LENS, KV_SIZES}},
    {"id": "forget_W_o",
     "mistake": "忘了输出投影 W_o，直接返回拼接结果",
     "edits": {"multihead_attention": [("return self.W_o(output_concat)", "return output_concat")]},
     "caught_by": _MHA_ALL},
    {"id": "swap_W_k_W_v",
     "mistake": "forward 中把 W_k 和 W_v 用反了",
     "edits": {"multihead_attention": [
         ("transpose_qkv(self.W_k(keys)", "transpose_qkv(self.W_v(keys)"),
         ("transpose_qkv(self.W_v(values)", "transpose_qkv(self.W_k(values)")]},
     "caught_by": _MHA_ALL},
    {"id": "swap_W_q_W_k",
     "mistake": "forward 中把 W_q 和 W_k 用反了：W_q 投影键，W_k 投影查询（两者输入维度相同时不报错）",
     "edits": {"multihead_attention": [
         ("transpose_qkv(self.W_q(queries)", "transpose_qkv(self.W_k(queries)"),
         ("transpose_qkv(self.W_k(keys)", "transpose_qkv(self.W_q(keys)")]},
     "caught_by": _MHA_ALL},
    {"id": "self_attention_only",
     "mistake": "以为是自注意力：键和值也由 queries 投影，传入的 keys、values 没有用上",
     "edits": {"multihead_attention": [("        queries = transpose_qkv(self.W_q(queries), self.num_heads)\n",
                                        "        keys = values = queries  # 自注意力\n"
                                        "        queries = transpose_qkv(self.W_q(queries), self.num_heads)\n")]},
     "caught_by": {SHAPES, *_MHA_ALL}},
    {"id": "init_key_value_sizes_swapped",
     "mistake": "构造 W_k、W_v 时把 key_size 和 value_size 写反（两者相等时看不出来）",
     "edits": {"multihead_attention": [
         ("nn.Linear(key_size, num_hiddens", "nn.Linear(VALUE_SIZE, num_hiddens"),
         ("nn.Linear(value_size, num_hiddens", "nn.Linear(key_size, num_hiddens"),
         ("nn.Linear(VALUE_SIZE, num_hiddens", "nn.Linear(value_size, num_hiddens")]},
     "caught_by": {KV_SIZES}},
    {"id": "W_k_built_with_query_size",
     "mistake": "W_k 用 query_size 作输入维度（key_size 等于 query_size 时看不出来，自注意力中正是如此）",
     "edits": {"multihead_attention": [("nn.Linear(key_size, num_hiddens", "nn.Linear(query_size, num_hiddens")]},
     "caught_by": {KV_SIZES, PARAM_COUNT}},
    {"id": "bias_always_on",
     "mistake": "忽略 bias 参数，全连接层总带偏置",
     "edits": {"multihead_attention": [
         ("self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)", "self.W_q = nn.Linear(query_size, num_hiddens)"),
         ("self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)", "self.W_k = nn.Linear(key_size, num_hiddens)"),
         ("self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)", "self.W_v = nn.Linear(value_size, num_hiddens)"),
         ("self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)", "self.W_o = nn.Linear(num_hiddens, num_hiddens)")]},
     "caught_by": {PARAM_COUNT}},
    {"id": "W_o_back_to_query_size",
     "mistake": "以为输出要回到输入维度，W_o 写成 num_hiddens → query_size",
     "edits": {"multihead_attention": [
         ("nn.Linear(num_hiddens, num_hiddens, bias=bias)", "nn.Linear(num_hiddens, query_size, bias=bias)")]},
     "caught_by": {SHAPES, VALID_LENS, KV_SIZES}},
    {"id": "own_attention_correct",
     "mistake": "（不是错误）自己写注意力模块而不用 d2l.DotProductAttention：应得满分",
     "edits": _own(),
     "caught_by": set()},
    {"id": "own_attention_no_weights",
     "mistake": "自己写的注意力把权重存成 self.weights，而不是题目规定的 self.attention_weights",
     "edits": _own(("self.attention_weights = F.softmax(scores, dim=-1)\n"
                    "        return torch.bmm(self.dropout(self.attention_weights), values)",
                    "self.weights = F.softmax(scores, dim=-1)\n"
                    "        return torch.bmm(self.dropout(self.weights), values)")),
     "caught_by": {SHAPES}},
    {"id": "scale_by_num_hiddens",
     "mistake": "自己写的注意力按 sqrt(num_hiddens) 而不是 sqrt(每个头的维度) 缩放",
     "edits": _own(("self.attention = MyDotProductAttention(dropout)",
                    "self.attention = MyDotProductAttention(dropout)\n        self.attention.scale_dim = num_hiddens"),
                   ("/ math.sqrt(d)", "/ math.sqrt(getattr(self, 'scale_dim', d))")),
     "caught_by": _MHA_ALL},
    {"id": "dropout_ignores_eval",
     "mistake": "自己写的注意力用 F.dropout(x, p) 而不是 nn.Dropout：eval() 下仍在暂退",
     "edits": _own(("torch.bmm(self.dropout(self.attention_weights), values)",
                    "torch.bmm(F.dropout(self.attention_weights, self.dropout.p), values)")),
     "caught_by": {VS_TORCH}},
    {"id": "mask_built_on_cpu",
     "mistake": "在 forward 中用 torch.arange(n) 在 CPU 上构造掩码（只在 GPU 上出错）",
     "needs_cuda": True,
     "edits": _own(("torch.arange(keys.shape[1], device=scores.device)", "torch.arange(keys.shape[1])")),
     "caught_by": {SHAPES, VALID_LENS, KV_SIZES}},
    {"id": "mha_torch_wrapped",
     "mistake": "把参数拷进题目禁止的 nn.MultiheadAttention，由一个自己的函数调用它（结果是对的）",
     "cells": {"multihead_attention": _TORCH_WRAPPED},
     "caught_by": _EXERCISE_2},
    {"id": "mha_sdpa_alias",
     "mistake": "给题目禁止的 F.scaled_dot_product_attention 起个别名，拆头后调用它（结果是对的）",
     "cells": {"multihead_attention": _SDPA_ALIAS},
     "caught_by": _EXERCISE_2},
    {"id": "mha_d2l_subclass",
     "mistake": "继承题目禁止的 d2l.MultiHeadAttention，只换上 d2l-zh 签名要求的全连接层（结果是对的）",
     "cells": {"multihead_attention": _D2L_SUBCLASS},
     "caught_by": _EXERCISE_2},
    # ---- exercise 3: per-head weights
    {"id": "per_head_batch_major",
     "mistake": "逐头读出权重时以为头在外层：reshape(num_heads, batch_size, ...) 再交换前两维",
     "edits": {"per_head_weights": [
         ("weights.reshape(-1, mha.num_heads, weights.shape[1], weights.shape[2])",
          "weights.reshape(mha.num_heads, -1, weights.shape[1], weights.shape[2]).transpose(0, 1)")]},
     "caught_by": {"test_per_head_weights"}},
    # ---- exercise 4: load_from_torch
    {"id": "load_without_bias",
     "mistake": "载入参数时只复制权重，忘了 in_proj_bias 与 out_proj.bias",
     "edits": {"load_from_torch": [
         ("if torch_mha.in_proj_bias is not None:", "if False:"),
         ("if torch_mha.out_proj.bias is not None:", "if False:")]},
     "caught_by": {"test_load_from_torch"}},
    {"id": "load_ignores_kdim_vdim",
     "mistake": "总是从 in_proj_weight 取权重，kdim/vdim 与 embed_dim 不同时（它为 None）出错",
     "edits": {"load_from_torch": [("if torch_mha.in_proj_weight is not None:", "if True:")]},
     "caught_by": {"test_load_from_torch"}},
    {"id": "load_wrong_order",
     "mistake": "把 in_proj_weight 的三段当成 (键, 查询, 值) 的顺序",
     "edits": {"load_from_torch": [("w_q, w_k, w_v = torch_mha.in_proj_weight.split(E, dim=0)",
                                    "w_k, w_q, w_v = torch_mha.in_proj_weight.split(E, dim=0)")]},
     "caught_by": {"test_load_from_torch"}},
    {"id": "load_no_return",
     "mistake": "载入后没有返回 mha",
     "edits": {"load_from_torch": [("    return mha\n", "")]},
     "caught_by": {"test_load_from_torch"}},
    # ---- exercise 5: head_contributions
    {"id": "hc_heads_interleaved",
     "mistake": "拆头时把最后一维当成 (head_dim, num_heads)：各头拿到的是交错的列",
     "edits": {"head_contributions": [
         (_HC_SPLIT, "X = X.reshape(batch_size, num_queries, head_dim, num_heads).permute(0, 3, 1, 2)"),
         (_HC_W, "W = W_o.weight.reshape(W_o.out_features, head_dim, num_heads).permute(2, 1, 0)")]},
     "caught_by": {HC}},
    {"id": "hc_rows_not_columns",
     "mistake": "按行而不是按列切 W_o 的权重（W_o.weight[i*head_dim:(i+1)*head_dim]）",
     "cells": {"head_contributions": _per_head("parts.append(X[..., cols] @ W_o.weight[cols])")},
     "caught_by": {HC}},
    {"id": "hc_no_transpose",
     "mistake": "逐头相乘时忘了转置：X 的第 i 段乘以 W_o 的第 i 段列本身（W_o 的输出维度恰好等于 head_dim 时不报错）",
     "cells": {"head_contributions": _per_head("parts.append(X[..., cols] @ W_o.weight[:, cols])")},
     "caught_by": {HC}},
    {"id": "hc_bias_in_each_head",
     "mistake": "每个头的贡献都加上了 W_o 的偏置（F.linear 带偏置），各头之和就多了 (num_heads - 1) 份偏置",
     "cells": {"head_contributions": _per_head("parts.append(F.linear(X[..., cols], W_o.weight[:, cols], W_o.bias))")},
     "caught_by": {HC}},
    {"id": "hc_heads_last",
     "mistake": "返回 (batch_size, 查询数, num_heads, 输出维度)：头的维度放错了位置",
     "edits": {"head_contributions": [("return torch.matmul(X, W.unsqueeze(0))",
                                       "return torch.matmul(X, W.unsqueeze(0)).permute(0, 2, 1, 3)")]},
     "caught_by": {HC}},
    {"id": "hc_loop_ok",
     "mistake": "（正确）逐个头循环：X 的第 i 段乘以 W_o 第 i 段列的转置",
     "cells": {"head_contributions": _per_head("parts.append(X[..., cols] @ W_o.weight[:, cols].T)")},
     "caught_by": set()},
    {"id": "hc_zero_other_heads_ok",
     "mistake": "（正确）逐个头：把其他头置零后调用 W_o，再减去偏置（与讲义的掩蔽同一个思路）",
     "cells": {"head_contributions": _per_head(
         "only_i = torch.zeros_like(X)\n"
         "        only_i[..., cols] = X[..., cols]\n"
         "        parts.append(W_o(only_i) if W_o.bias is None else W_o(only_i) - W_o.bias)")},
     "caught_by": set()},
    # ---- exercise 6: load_gpt2_attention
    {"id": "gpt2_no_transpose",
     "mistake": "把 Conv1D 的权重当成 nn.Linear 的存放方式，c_attn、c_proj 都没有转置（d×d 的块形状相同，不报错）",
     "edits": {"load_gpt2_attention": [("linear.weight.copy_(weight.T)", "linear.weight.copy_(weight)")]},
     "caught_by": {GPT2_PARAMS, GPT2_FORWARD}},
    {"id": "gpt2_c_proj_not_transposed",
     "mistake": "c_attn 的三段转置了，c_proj 却没有转置（它本来就是 d×d，形状对得上）",
     "edits": {"load_gpt2_attention": [
         ("linear.weight.copy_(weight.T)", "linear.weight.copy_(weight if linear is mha.W_o else weight.T)")]},
     "caught_by": {GPT2_FORWARD}},
    {"id": "gpt2_order_kqv",
     "mistake": "把 c_attn 的三段当成 (键, 查询, 值) 的顺序",
     "edits": {"load_gpt2_attention": [("w_q, w_k, w_v = state_dict", "w_k, w_q, w_v = state_dict"),
                                       ("b_q, b_k, b_v = state_dict", "b_k, b_q, b_v = state_dict")]},
     "caught_by": {GPT2_PARAMS, GPT2_FORWARD}},
    {"id": "gpt2_layer_zero",
     "mistake": "键名写死成第 0 层（h.0.attn.），忽略参数 layer",
     "edits": {"load_gpt2_attention": [('prefix = f"h.{layer}.attn."', 'prefix = "h.0.attn."')]},
     "caught_by": {GPT2_PARAMS, GPT2_FORWARD}},
    {"id": "gpt2_no_bias",
     "mistake": "只复制权重，忘了 c_attn.bias 与 c_proj.bias",
     "edits": {"load_gpt2_attention": [("            linear.bias.copy_(bias)\n", "")]},
     "caught_by": {GPT2_PARAMS, GPT2_FORWARD}},
    {"id": "gpt2_no_return",
     "mistake": "载入后没有返回 mha",
     "edits": {"load_gpt2_attention": [("    return mha\n", "")]},
     "caught_by": {GPT2_FORWARD}},
    {"id": "gpt2_shared_parameters",
     "mistake": "用 nn.Parameter(权重的转置) 替换原有参数：它与 state_dict 共用内存，数据类型也跟着 state_dict 变",
     "cells": {"load_gpt2_attention": _GPT2_HEAD + """    for linear, weight, bias in ((mha.W_q, W[:, :d], b[:d]), (mha.W_k, W[:, d:2 * d], b[d:2 * d]),
                                 (mha.W_v, W[:, 2 * d:], b[2 * d:]), """ + _GPT2_PROJ + """):
        linear.weight = nn.Parameter(weight.T)
        linear.bias = nn.Parameter(bias)
    return mha"""},
     "caught_by": {GPT2_PARAMS}},
    {"id": "gpt2_transpose_in_place",
     "mistake": "用 t_() 原地转置 state_dict 中的权重：载入的数值对，state_dict 却被改了（再载入一次就错）",
     "cells": {"load_gpt2_attention": _GPT2_HEAD + """    W.t_()
    state_dict[prefix + "c_proj.weight"].t_()
    with torch.no_grad():
        for linear, weight, bias in ((mha.W_q, W[:d], b[:d]), (mha.W_k, W[d:2 * d], b[d:2 * d]),
                                     (mha.W_v, W[2 * d:], b[2 * d:]), """ + _GPT2_PROJ + """):
            linear.weight.copy_(weight)
            linear.bias.copy_(bias)
    return mha"""},
     "caught_by": {GPT2_PARAMS}},
    {"id": "gpt2_load_state_dict_ok",
     "mistake": "（正确）改名、转置后交给 mha.load_state_dict(..., strict=False)：它把数值复制进原有的参数",
     "cells": {"load_gpt2_attention": _GPT2_HEAD + """    c_proj = prefix + "c_proj."
    mapped = {"W_o.weight": state_dict[c_proj + "weight"].T, "W_o.bias": state_dict[c_proj + "bias"]}
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        mapped[name + ".weight"] = W[:, i * d:(i + 1) * d].T
        mapped[name + ".bias"] = b[i * d:(i + 1) * d]
    mha.load_state_dict(mapped, strict=False)
    return mha"""},
     "caught_by": set()},
    {"id": "gpt2_transpose_first_ok",
     "mistake": "（正确）先把整个 c_attn.weight 转置成 (3d, d)，再沿第 0 维切三段，用 .data 赋值复制后的张量",
     "cells": {"load_gpt2_attention": _GPT2_HEAD + """    parts = W.T.split(d)
    for linear, weight, bias in zip((mha.W_q, mha.W_k, mha.W_v), parts, b.split(d)):
        linear.weight.data = weight.clone().to(linear.weight)
        linear.bias.data = bias.clone().to(linear.bias)
    mha.W_o.weight.data = state_dict[prefix + "c_proj.weight"].T.clone().to(mha.W_o.weight)
    mha.W_o.bias.data = state_dict[prefix + "c_proj.bias"].clone().to(mha.W_o.bias)
    return mha"""},
     "caught_by": set()},
]

# ---------------------------------------------------------------------------------------------------------------
# misconceptions (label, hint, slide title of DECK) and their twins: see catalog/a1_scoring.py

DECK = "notebooks/02_multihead_attention.ipynb"
_TRANSPOSES, _ARCHITECTURE = "`transpose_qkv` 与 `transpose_output`", "结构图"
_TORCH_MHA, _HEAD_MASKING = "对照一：`torch.nn.MultiheadAttention`", "哪个头更重要？逐个掩蔽"
_PARAMS, _DIMS = "参数量真的与 $h$ 无关吗？数一数", "维度怎么选：$p_q=p_k=p_v=p_o/h$"
_HEADS_WEIGHTS, _LENS = "四个头的注意力权重", "`valid_lens` 要按什么顺序复制？"
_HEADS_OUTER = "以为头在批量维的外层"  # one misconception, in transpose_output and in per_head_weights
# reshape alone, to whichever shape: one misconception each way (the shapes differ, so each variant is named apart)
_SPLIT_BY_RESHAPE = ("拆头时只用了 reshape，没有把头的轴换到前面", "症状：只有一个头或只有一个位置时全对。试一试："
                     "`X = torch.arange(8.).reshape(1, 2, 4)`（2 个位置、2 个头、每头 2 维），再 "
                     "`print(transpose_qkv(X, 2)[0])`：头 0 的两个位置应是 (0, 1) 与 (4, 5)，你的是什么？", _TRANSPOSES)
_MERGE_BY_RESHAPE = ("合并各头时没有把头的轴换回去", "症状：transpose_output(transpose_qkv(X, h), h) 不等于 X。"
                     "试一试：`X = torch.arange(8.).reshape(1, 2, 4)`，再 "
                     "`print(transpose_output(transpose_qkv(X, 2), 2) - X)`：它应原样还原 X（全是 0）。", _TRANSPOSES)
_UNUSED_LENS = "valid_lens 没有用上：注意力看了全部的键"
_SELF_ONLY = "只用查询做了自注意力，传入的键和值没有用上"
MISCONCEPTIONS = {
    "qkv_reshape_no_permute": _SPLIT_BY_RESHAPE,
    "qkv_split_sequence": _SPLIT_BY_RESHAPE,
    "output_reshape_no_permute": _MERGE_BY_RESHAPE,
    "output_merge_sequence": _MERGE_BY_RESHAPE,
    "valid_lens_repeat": ("valid_lens 被平铺，而不是每个样本重复 num_heads 次", "症状：批量为 1、或各样本的有效长度相同时全对。"
                          "试一试：`lens = torch.tensor([2, 5])`，再 `print(lens.repeat(4))`：transpose_qkv 之后前 4 行是"
                          "样本 0 的 4 个头，它们都应该用 2，拿到的是什么？", _LENS),
    "forget_W_o": ("各头的输出拼接后没有经过 W_o", "多头注意力的输出是 W_o 作用在各头输出的拼接上：W_o 把各头的结果混合"
                   "起来，少了它输出就只是各头结果的并排。", _ARCHITECTURE),
    "output_heads_outermost": (_HEADS_OUTER, "症状：合并各头时，批量为 1 时全对，批量大于 1 时样本之间串了结果。"
                               "试一试：`X = torch.arange(16.).reshape(2, 2, 4)`（批量 2），再 "
                               "`print(transpose_output(transpose_qkv(X, 2), 2) - X)`：它应原样还原 X（全是 0）。", _TRANSPOSES),
    "scale_by_num_hiddens": ("缩放因子用了 num_hiddens，而不是每个头的维度", "症状：形状都对，只有数值不对，注意力权重比参考的"
                             "更平（分数除以了太大的数）。试一试：在 forward 里加一行 `print(queries.shape, keys.shape)`，"
                             "看一个头的查询和键有多长，再与你的缩放因子里的那个维度比一比。", _DIMS),
    "dropout_ignores_eval": ("暂退法在 eval() 模式下仍在起作用", "症状：调用 eval() 之后，同样的输入两次调用得到不同的结果。"
                             "试一试：`x = torch.ones(6)`，再 `print(F.dropout(x, 0.5), nn.Dropout(0.5).eval()(x))`："
                             "两种写法里，哪一种随 eval() 关掉了？", "试运行"),
    "hc_heads_interleaved": ("以为各头的特征是交错排列的", "症状：只有一个头时全对。试一试："
                             "`X = torch.arange(8.).reshape(1, 1, 8)`，再 `print(transpose_qkv(X, 4)[1])`：拆头之后，"
                             "头 1 拿到的是哪几个通道？拼接时它们回到同样的位置。", _HEAD_MASKING),
    "gpt2_no_transpose": ("把 GPT-2 的 Conv1D 权重当成了 nn.Linear 的存放方式", "症状：形状都对、不报错，输出却与 GPT-2 不一致。"
                          "试一试：`print(nn.Linear(2, 3).weight.shape)`，再打印 GPT-2 的 `c_attn.weight.shape`（d 行 3d 列）："
                          "nn.Linear 算的是 x Wᵀ，Conv1D 算的是 x W，同一个 d×d 的块在两边是怎么放的？", _TORCH_MHA),
    "gpt2_order_kqv": ("c_attn 的三段顺序弄错了", "症状：形状都对，输出却与 GPT-2 不一致，三个投影互相换了位置。试一试："
                       "`print(nn.MultiheadAttention(4, 2).in_proj_weight.shape)`：它与 GPT-2 的 c_attn 一样把三个投影拼在"
                       "一起，对照讲义的那一页，三段依次是哪三个？", _TORCH_MHA),
    "W_k_built_with_query_size": ("键的投影 W_k 按查询的维度构造", "症状：自注意力（键与查询一样宽）时全对；键与查询宽度"
                                  "不同时，投影键就报形状错误，参数个数也不对。试一试：`m = MultiHeadAttention(6, 16, 10, 16, 4, 0.0)`"
                                  "（键 6 维、查询 16 维），再 `print(m.W_k.weight.shape)`：nn.Linear 的权重形状是（输出维度, "
                                  "输入维度），W_k 的输入是哪个张量的最后一维？", _PARAMS),
    "bias_always_on": ("全连接层总带偏置，不随 bias 参数", "症状：bias=True 时参数个数对，默认的 bias=False 时多出 "
                       "4 × num_hiddens 个。试一试：`print([n for n, _ in MultiHeadAttention(4, 4, 4, 4, 2, 0.0)"
                       ".named_parameters()])`：默认不加偏置，列表里应有几项？", _PARAMS),
    "W_o_back_to_query_size": ("以为输出要回到查询的维度", "症状：query_size 等于 num_hiddens 时全对；不等时输出的"
                               "最后一维是 query_size，W_o 的形状也不对。试一试：`m = MultiHeadAttention(3, 5, 2, 4, 2, 0.0)`"
                               "（查询 5 维、num_hiddens 为 4），再 `print(m.W_o)`：按讲义的公式，W_o 作用在什么上，"
                               "输出应是几维？", _DIMS),
    "valid_lens_2d_flattened": ("复制二维 valid_lens 时把它展平成了一维", "症状：一维 valid_lens 全对，二维 valid_lens（每个"
                                "查询各有一个有效长度）时报错或结果不对。试一试：`lens = torch.tensor([[1, 5], [2, 4]])`，再 "
                                "`print(torch.repeat_interleave(lens, repeats=3).shape)`：复制之后它应是 "
                                "(batch_size*num_heads, 查询数) = (6, 2)，你得到的形状是什么？", _LENS),
    "per_head_batch_major": (_HEADS_OUTER, "症状：逐头读出权重时，只有一个样本时全对，样本多于一个时各样本的头串了。试一试："
                             "`w = torch.arange(4.).reshape(4, 1, 1)`（2 个样本、2 个头），再 `print(per_head_weights("
                             "SimpleNamespace(num_heads=2, attention=SimpleNamespace(attention_weights=w))).flatten())`："
                             "第 b*num_heads+i 个切片属于第 b 个样本的第 i 个头，所以应依次是 0, 1, 2, 3，你的是什么？",
                             _HEADS_WEIGHTS),
    "hc_no_transpose": ("把 W_o 那一段列直接右乘，没弄清 nn.Linear 的权重怎样存放", "症状：只在 W_o 的输出维度等于每个头的维度时"
                        "不报错，数值却不对。试一试：`print(nn.Linear(4, 2).weight.shape)`：nn.Linear 的权重是"
                        "（输出维度, 输入维度），它算的是 x Wᵀ。对照题目的小例子，头 0 的贡献 (5, 2) 是怎样由 W_o 的"
                        "前两列和 (1, 2) 算出来的？", _HEAD_MASKING),
    "hc_bias_in_each_head": ("每个头的贡献都带上了 W_o 的偏置", "症状：W_o 不带偏置时全对；带偏置时，各头贡献之和与 W_o(X) 对不上。"
                             "试一试：`W, X = nn.Linear(4, 2), torch.randn(1, 1, 4)`，再 "
                             "`print(head_contributions(W, X, 2).sum(1) - W(X), W.bias)`：W_o(X) 里偏置只加了一次，"
                             "各头之和里加了几次？", _HEAD_MASKING),
    "hc_heads_last": ("返回的张量里，头的维度放在了查询之后", "症状：数值都对，形状却是 (batch_size, 查询数, num_heads, 输出维度)。"
                      "试一试：`print(head_contributions(nn.Linear(6, 5), torch.randn(2, 4, 6), 3).shape)`：[b, i] "
                      "应是第 b 个样本第 i 个头的贡献（每个查询一行），与讲义里逐头的注意力权重（样本, 头, 查询, 键）"
                      "的排列对照，你的第 1 维是什么？", _HEADS_WEIGHTS),
    "gpt2_c_proj_not_transposed": ("以为 c_proj 的权重是方阵，就不用换存放方式", "症状：test_load_gpt2_params 通过（W_q、W_k、"
                                   "W_v 都对），载入后的输出却与 GPT-2 不一致。试一试：`W, x = torch.randn(3, 3), torch.randn(3)`，"
                                   "再 `print(x @ W, F.linear(x, W))`：同一个方阵，Conv1D 算的 x W 与 nn.Linear 算的 x Wᵀ "
                                   "相等吗？", _TORCH_MHA),
    "gpt2_layer_zero": ("没有按参数 layer 选出那一层的参数", "症状：载入第 0 层时全对，载入其他层时得到的仍是第 0 层的参数。"
                        "试一试：`g = torch.Generator(); sd = {**_gpt2_layer(4, 0, g), **_gpt2_layer(4, 1, g)}`"
                        "（`_gpt2_layer`、`GPT2Holder` 在可见测试里），再 `m = load_gpt2_attention(GPT2Holder(4, 2), sd, 1)`、"
                        "`print(torch.equal(m.W_o.bias, sd[\"h.1.attn.c_proj.bias\"]))`：GPT-2 的每一层都有自己的"
                        "注意力参数，应是 True。", "真实模型的配置"),
    "gpt2_no_bias": ("只载入了权重，没有载入偏置", "症状：形状都对、不报错，W_q(x) 与 GPT-2 的 c_attn(x) 的对应一段处处差"
                     "一个固定的向量。试一试：`g = torch.Generator(); sd = _gpt2_layer(4, 0, g)`（可见测试里的函数），"
                     "`m = load_gpt2_attention(GPT2Holder(4, 2), sd, 0)`，再 `print(m.W_o.bias, sd[\"h.0.attn.c_proj.bias\"])`："
                     "GPT-2 的 Conv1D 算的是 x W + b，两者相同吗？", _TORCH_MHA),
    "gpt2_shared_parameters": ("参数与 state_dict 共用了内存（别名，aliasing），没有复制数值", "症状：刚载入时数值都对，之后"
                               "修改 state_dict，mha 的参数也跟着变；mha 是 float64 时，载入后参数变成了 float32。试一试："
                               "`w = torch.zeros(2); p = nn.Parameter(w)`，再 `w.add_(1); print(p)`：p 跟着 w 变了吗？"
                               "（用 `p.data = w` 赋值也一样。）", _TORCH_MHA),
    "gpt2_transpose_in_place": ("载入时改动了传入的 state_dict", "症状：第一次载入的数值是对的，但 state_dict 被改了（权重的形状"
                                "或数值变了），再载入一次就错。试一试：`sd = _gpt2_layer(4, 0, torch.Generator())`"
                                "（可见测试里的函数），`before = {k: v.clone() for k, v in sd.items()}`，调用一次 "
                                "load_gpt2_attention 之后 `print([k for k in sd if not torch.equal(sd[k], before[k])])`："
                                "原地（in-place）操作和给字典的键重新赋值都会改动调用者的数据，列表应是空的。", _TORCH_MHA),
    "swap_W_k_W_v": ("键和值的投影用反了", "键用 W_k 投影、值用 W_v 投影：两者的维度相同时不会报错，但每个头看的键和取的值"
                     "都不对了。", _ARCHITECTURE),
    "valid_lens_2d_query_axis": ("二维 valid_lens 沿查询轴复制了，而不是沿批量轴", "症状：一维 valid_lens 全对，二维 valid_lens"
                                 "（每个查询各有一个有效长度）时结果不对，却不报错。试一试：`lens = torch.tensor([[1, 5], [2, 4]])`"
                                 "（批量 2，每个样本 2 个查询），照你 forward 里的写法把它复制给 3 个头，再 `print(结果.reshape(-1))`："
                                 "transpose_qkv 之后前 3 行是样本 0 的 3 个头，每行的 2 个查询依次用 1、5，展平后应以 "
                                 "1, 5, 1, 5, 1, 5 开头，你的是什么？", _LENS),
    "mha_ignores_valid_lens": (_UNUSED_LENS, "症状：valid_lens=None 时全对，传入 valid_lens 后输出与不传时一模一样。试一试："
                               "`m = MultiHeadAttention(4, 4, 4, 8, 2, 0.0).eval(); X = torch.randn(2, 3, 4)`，再 "
                               "`print((m(X, X, X, torch.tensor([1, 1])) - m(X, X, X, None)).abs().max())`：有效长度为 1 时"
                               "每个查询只该看第一个词元，两个输出应该不同，差是多少？", "为什么需要掩蔽？",
                               "notebooks/01_attention_scoring.ipynb"),
    "swap_W_q_W_k": ("查询和键的投影用反了", "症状：查询与键一样宽时不报错，输出却不对；宽度不同时投影就报形状错误。试一试："
                     "`m = MultiHeadAttention(3, 5, 2, 4, 2, 0.0)`（键 3 维、查询 5 维），再 "
                     "`print(m.W_q.weight.shape, m.W_k.weight.shape)`：nn.Linear 的权重形状是（输出维度, 输入维度），"
                     "哪一个能接收 5 维的查询？再看 forward 里它作用在哪个张量上。", "模型"),
    "self_attention_only": (_SELF_ONLY, "症状：查询、键、值是同一个张量（自注意力）时全对；三者不同时输出不对。试一试："
                            "`m = MultiHeadAttention(4, 4, 4, 8, 2, 0.0).eval()`，再 `m(torch.randn(1, 2, 4), "
                            "torch.randn(1, 5, 4), torch.randn(1, 5, 4), None); print(m.attention.attention_weights.shape)`："
                            "2 个查询、5 个键，形状应是 (2, 2, 5)，你的是什么？", "模型"),
}

# the token that tells each misconception's fix apart: its hint must not contain it (tests/test_catalog_schema.py)
FIXES = {"qkv_reshape_no_permute": "permute", "output_reshape_no_permute": "permute",
         "valid_lens_repeat": "repeat_interleave", "forget_W_o": "self.W_o(", "output_heads_outermost": "样本在外",
         "scale_by_num_hiddens": "/ num_heads", "dropout_ignores_eval": "training=self.training",
         "hc_heads_interleaved": "连续", "gpt2_no_transpose": ".T", "gpt2_order_kqv": "第一段属于查询",
         "swap_W_k_W_v": "W_v(values)", "W_k_built_with_query_size": "Linear(key_size",
         "bias_always_on": "bias=bias", "W_o_back_to_query_size": "Linear(num_hiddens, num_hiddens",
         "valid_lens_2d_flattened": "dim=0", "per_head_batch_major": "样本在外", "hc_no_transpose": ".T",
         "hc_bias_in_each_head": "不含偏置", "hc_heads_last": "dim=1", "gpt2_c_proj_not_transposed": ".T",
         "gpt2_layer_zero": "{layer}", "gpt2_no_bias": "bias.copy_", "gpt2_shared_parameters": "copy_",
         "gpt2_transpose_in_place": ".T", "qkv_split_sequence": "permute", "output_merge_sequence": "permute",
         "valid_lens_2d_query_axis": "dim=0", "mha_ignores_valid_lens": "values, valid_lens)", "swap_W_q_W_k": "W_q(queries)",
         "self_attention_only": "W_k(keys)"}

_MHA_INIT = '''class MultiHeadAttention(nn.Module):
    def __init__(self, key_size, query_size, value_size, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.attention = d2l.DotProductAttention(dropout)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        h = self.num_heads
'''
_OWN_SCALED = '''class MyAttention(nn.Module):
    def __init__(self, dropout, scale_dim):
        super().__init__()
        self.dropout, self.scale_dim = nn.Dropout(dropout), scale_dim

    def forward(self, queries, keys, values, valid_lens=None):
        scores = queries @ keys.transpose(1, 2) / self.scale_dim ** 0.5
        if valid_lens is not None:
            lens = valid_lens.reshape(valid_lens.shape[0], -1)  # (行数, 1) 或 (行数, 查询数)
            pad = torch.arange(keys.shape[1], device=keys.device) >= lens.unsqueeze(-1)
            scores = scores.masked_fill(pad, torch.finfo(scores.dtype).min)
        self.attention_weights = scores.softmax(dim=-1)
        return {dropout} @ values


'''
_OWN_INIT = _MHA_INIT.replace("d2l.DotProductAttention(dropout)", "MyAttention(dropout, {scale})")
_OWN_FORWARD = '''        q, k, v = (transpose_qkv(W(x), h) for W, x in ((self.W_q, queries), (self.W_k, keys), (self.W_v, values)))
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))'''
_GPT2_TWIN = '''def load_gpt2_attention(mha, state_dict, layer):
    key = f"h.{{layer}}.attn."
    W, b, P = state_dict[key + "c_attn.weight"], state_dict[key + "c_attn.bias"], state_dict[key + "c_proj.weight"]
    d = W.shape[0]
    with torch.no_grad():
        for i, linear in enumerate(({order})):
            linear.weight.copy_({block})
            linear.bias.copy_(b[i * d:(i + 1) * d])
        mha.W_o.weight.copy_({proj})
        mha.W_o.bias.copy_(state_dict[key + "c_proj.bias"])
    return mha'''
TWINS = {
    "output_heads_outermost": {"transpose_output": '''def transpose_output(X, num_heads):
    rows, n, head_dim = X.shape
    X = X.view(num_heads, rows // num_heads, n, head_dim)  # 以为头在外层
    return X.permute(1, 2, 0, 3).reshape(rows // num_heads, n, num_heads * head_dim)'''},
    "scale_by_num_hiddens": {"multihead_attention": _OWN_SCALED.format(dropout="self.dropout(self.attention_weights)")
                             + _OWN_INIT.format(scale="num_hiddens") + _OWN_FORWARD},
    "dropout_ignores_eval": {"multihead_attention": _OWN_SCALED.format(
        dropout="F.dropout(self.attention_weights, p=self.dropout.p)")
        + _OWN_INIT.format(scale="num_hiddens // num_heads") + _OWN_FORWARD},
    "hc_heads_interleaved": {"head_contributions": '''def head_contributions(W_o, X, num_heads):
    return torch.stack([X[..., i::num_heads] @ W_o.weight[:, i::num_heads].T for i in range(num_heads)], dim=1)'''},
    "gpt2_no_transpose": {"load_gpt2_attention": _GPT2_TWIN.format(order="mha.W_q, mha.W_k, mha.W_v",
                                                                   block="W[:, i * d:(i + 1) * d]", proj="P")},
    "gpt2_order_kqv": {"load_gpt2_attention": _GPT2_TWIN.format(order="mha.W_k, mha.W_q, mha.W_v",
                                                                block="W[:, i * d:(i + 1) * d].T", proj="P.T")},
    "qkv_reshape_no_permute": {"transpose_qkv": '''def transpose_qkv(X, num_heads):
    batch_size, n, num_hiddens = X.shape
    return X.reshape(batch_size * n, num_heads, num_hiddens // num_heads)'''},
    "output_reshape_no_permute": {"transpose_output": '''def transpose_output(X, num_heads):
    return X.reshape(X.shape[0] // num_heads, num_heads, -1)'''},
    "valid_lens_repeat": {"multihead_attention": _MHA_INIT + '''        q, k, v = (transpose_qkv(W(x), h) for W, x in ((self.W_q, queries), (self.W_k, keys), (self.W_v, values)))
        if valid_lens is not None:
            valid_lens = torch.cat([valid_lens] * h)
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))'''},
    "forget_W_o": {"multihead_attention": _MHA_INIT + '''        q, k, v = (transpose_qkv(W(x), h) for W, x in ((self.W_q, queries), (self.W_k, keys), (self.W_v, values)))
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)
        return transpose_output(self.attention(q, k, v, valid_lens), h)'''},
    "W_k_built_with_query_size": {"multihead_attention": _MHA_INIT.replace(
        """        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
""", """        self.W_q, self.W_k = (nn.Linear(query_size, num_hiddens, bias=bias) for _ in range(2))
""") + _OWN_FORWARD},
    "bias_always_on": {"multihead_attention": _MHA_INIT.replace(
        """        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)
""", """        for name, size in (("W_q", query_size), ("W_k", key_size), ("W_v", value_size), ("W_o", num_hiddens)):
            setattr(self, name, nn.Linear(size, num_hiddens))
""") + _OWN_FORWARD},
    "swap_W_k_W_v": {"multihead_attention": _MHA_INIT + '''        q = transpose_qkv(self.W_q(queries), h)
        k = transpose_qkv(self.W_v(keys), h)
        v = transpose_qkv(self.W_k(values), h)
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))'''},
    "W_o_back_to_query_size": {"multihead_attention": _MHA_INIT.replace(
        "self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)",
        "self.W_o = nn.Linear(num_hiddens, self.W_q.in_features, bias=bias)  # 变回查询的维度") + _OWN_FORWARD},
    "valid_lens_2d_flattened": {"multihead_attention": _MHA_INIT + '''        q, k, v = (transpose_qkv(W(x), h) for W, x in ((self.W_q, queries), (self.W_k, keys), (self.W_v, values)))
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h)
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))'''},
    "per_head_batch_major": {"per_head_weights": '''def per_head_weights(mha):
    weights = mha.attention.attention_weights
    return torch.stack(weights.chunk(mha.num_heads, dim=0), dim=1)  # 每一块是一个头'''},
    "hc_no_transpose": {"head_contributions": '''def head_contributions(W_o, X, num_heads):
    B, n, d = X.shape
    X_heads = X.view(B, n, num_heads, d // num_heads).transpose(1, 2)  # (B, h, n, head_dim)
    W_heads = W_o.weight.view(W_o.out_features, num_heads, d // num_heads).transpose(0, 1)  # (h, 输出维度, head_dim)
    return X_heads @ W_heads'''},
    "hc_bias_in_each_head": {"head_contributions": '''def head_contributions(W_o, X, num_heads):
    head_dim = X.shape[-1] // num_heads
    out = []
    for i in range(num_heads):
        keep = torch.zeros_like(X)
        keep[..., i * head_dim:(i + 1) * head_dim] = 1
        out.append(W_o(X * keep))  # 只留头 i，其余置零（讲义的掩蔽）
    return torch.stack(out, dim=1)'''},
    "hc_heads_last": {"head_contributions": '''def head_contributions(W_o, X, num_heads):
    B, n, d = X.shape
    X_heads = X.reshape(B, n, num_heads, d // num_heads)
    W_heads = W_o.weight.reshape(-1, num_heads, d // num_heads)
    return torch.einsum("bnhk,ohk->bnho", X_heads, W_heads)'''},
    "gpt2_c_proj_not_transposed": {"load_gpt2_attention": _GPT2_TWIN.format(
        order="mha.W_q, mha.W_k, mha.W_v", block="W[:, i * d:(i + 1) * d].T", proj="P")},
    "gpt2_layer_zero": {"load_gpt2_attention": '''def load_gpt2_attention(mha, state_dict, layer):
    def find(suffix):
        return next(v for k, v in state_dict.items() if k.endswith(suffix))
    W, b = find("attn.c_attn.weight"), find("attn.c_attn.bias")
    d = W.shape[0]
    with torch.no_grad():
        for i, linear in enumerate((mha.W_q, mha.W_k, mha.W_v)):
            linear.weight.copy_(W[:, i * d:(i + 1) * d].T)
            linear.bias.copy_(b[i * d:(i + 1) * d])
        mha.W_o.weight.copy_(find("attn.c_proj.weight").T)
        mha.W_o.bias.copy_(find("attn.c_proj.bias"))
    return mha'''},
    "gpt2_no_bias": {"load_gpt2_attention": '''def load_gpt2_attention(mha, state_dict, layer):
    p = f"h.{layer}.attn."
    w_qkv = state_dict[p + "c_attn.weight"].T  # (3d, d)
    d = w_qkv.shape[1]
    with torch.no_grad():
        mha.W_q.weight[:] = w_qkv[:d]
        mha.W_k.weight[:] = w_qkv[d:2 * d]
        mha.W_v.weight[:] = w_qkv[2 * d:]
        mha.W_o.weight[:] = state_dict[p + "c_proj.weight"].T
    return mha'''},
    "gpt2_shared_parameters": {"load_gpt2_attention": '''def load_gpt2_attention(mha, state_dict, layer):
    pre = f"h.{layer}.attn."
    d = state_dict[pre + "c_proj.weight"].shape[0]
    weights = state_dict[pre + "c_attn.weight"].T.split(d)
    biases = state_dict[pre + "c_attn.bias"].split(d)
    for linear, w, b in zip((mha.W_q, mha.W_k, mha.W_v), weights, biases):
        linear.weight.data, linear.bias.data = w, b
    mha.W_o.weight.data = state_dict[pre + "c_proj.weight"].T
    mha.W_o.bias.data = state_dict[pre + "c_proj.bias"]
    return mha'''},
    "gpt2_transpose_in_place": {"load_gpt2_attention": '''def load_gpt2_attention(mha, state_dict, layer):
    pre = f"h.{layer}.attn."
    for name in ("c_attn.weight", "c_proj.weight"):  # 先换成 nn.Linear 的存放方式
        state_dict[pre + name] = state_dict[pre + name].T.contiguous()
    W, b = state_dict[pre + "c_attn.weight"], state_dict[pre + "c_attn.bias"]
    d = W.shape[1]
    with torch.no_grad():
        for i, linear in enumerate((mha.W_q, mha.W_k, mha.W_v)):
            linear.weight.copy_(W[i * d:(i + 1) * d])
            linear.bias.copy_(b[i * d:(i + 1) * d])
        mha.W_o.weight.copy_(state_dict[pre + "c_proj.weight"])
        mha.W_o.bias.copy_(state_dict[pre + "c_proj.bias"])
    return mha'''},
    "qkv_split_sequence": {"transpose_qkv": '''def transpose_qkv(X, num_heads):
    batch_size, n, num_hiddens = X.shape
    return X.view(batch_size * num_heads, n, num_hiddens // num_heads)  # 直接变成目标形状'''},
    "output_merge_sequence": {"transpose_output": '''def transpose_output(X, num_heads):
    rows, n, head_dim = X.shape
    return X.view(rows // num_heads, n, num_heads * head_dim)'''},
    "valid_lens_2d_query_axis": {"multihead_attention": _MHA_INIT + '''        q, k, v = (transpose_qkv(W(x), h) for W, x in ((self.W_q, queries), (self.W_k, keys), (self.W_v, values)))
        if valid_lens is not None:
            if valid_lens.dim() == 1:
                valid_lens = valid_lens.repeat_interleave(h)
            else:
                valid_lens = valid_lens.repeat_interleave(h, dim=1)  # 每个查询的有效长度复制 h 份
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))'''},
    "mha_ignores_valid_lens": {"multihead_attention": _MHA_INIT + '''        q, k, v = (transpose_qkv(W(x), h) for W, x in ((self.W_q, queries), (self.W_k, keys), (self.W_v, values)))
        return self.W_o(transpose_output(self.attention(q, k, v), h))'''},
    "swap_W_q_W_k": {"multihead_attention": _MHA_INIT + '''        q, k, v = (transpose_qkv(W(x), h) for W, x in ((self.W_k, queries), (self.W_q, keys), (self.W_v, values)))
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))'''},
    "self_attention_only": {"multihead_attention": _MHA_INIT + '''        X = queries  # 自注意力：查询、键、值来自同一个序列
        q, k, v = transpose_qkv(self.W_q(X), h), transpose_qkv(self.W_k(X), h), transpose_qkv(self.W_v(X), h)
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), h))'''},
}
