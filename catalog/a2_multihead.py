"""Catalog of assignment 2 (multi-head attention): the lecturer's d2l-zh code and realistic mistakes.

`LECTURER` is the code of the lecturer's deck (seeds 000/002) verbatim; cells it does not cover
(`per_head_weights`, `load_from_torch`, the experiment) keep the source solution.
Each variant lists the exact test cells that must lose points (no cascade between exercises).
"""

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


_MHA_ALL = ("test_mha_vs_torch", "test_mha_valid_lens", "test_mha_kv_sizes")

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
    {"id": "output_heads_outermost",
     "mistake": "transpose_output 以为头在批量维度的最外层（按 (num_heads, batch_size) 拆分）",
     "edits": {"transpose_output": [
         ("X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])\n    X = X.permute(0, 2, 1, 3)",
          "X = X.reshape(num_heads, -1, X.shape[1], X.shape[2])\n    X = X.permute(1, 2, 0, 3)")]},
     "caught_by": {"test_transpose_output"}},
    {"id": "both_transposes_no_permute",
     "mistake": "两个变换都只用 reshape：往返能还原，但每个头拿到的不是自己的那一段特征",
     "edits": {"transpose_qkv": [("    X = X.permute(0, 2, 1, 3)\n", "")],
               "transpose_output": [("    X = X.permute(0, 2, 1, 3)\n", "")]},
     "caught_by": {"test_transpose_qkv", "test_transpose_output"}},
    # ---- exercise 2: MultiHeadAttention
    {"id": "valid_lens_repeat",
     "mistake": "用 repeat 而不是 repeat_interleave 扩展 valid_lens（批量为 1 或长度相同时看不出来）",
     "edits": {"multihead_attention": [
         ("torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)",
          "valid_lens.repeat(self.num_heads)")]},
     "caught_by": {"test_mha_valid_lens"}},
    {"id": "valid_lens_2d_flattened",
     "mistake": "repeat_interleave 没写 dim=0：二维 valid_lens 被展平，只在一维时正确",
     "edits": {"multihead_attention": [("repeats=self.num_heads, dim=0)", "repeats=self.num_heads)")]},
     "caught_by": {"test_mha_valid_lens"}},
    {"id": "valid_lens_none_crash",
     "mistake": "没有处理 valid_lens=None，直接对 None 调用 repeat_interleave",
     "edits": {"multihead_attention": [
         ("        if valid_lens is not None:\n            valid_lens = torch",
          "        if True:\n            valid_lens = torch")]},
     "caught_by": {"test_mha_vs_torch"}},
    {"id": "forget_W_o",
     "mistake": "忘了输出投影 W_o，直接返回拼接结果",
     "edits": {"multihead_attention": [("return self.W_o(output_concat)", "return output_concat")]},
     "caught_by": set(_MHA_ALL)},
    {"id": "swap_W_k_W_v",
     "mistake": "forward 中把 W_k 和 W_v 用反了",
     "edits": {"multihead_attention": [
         ("transpose_qkv(self.W_k(keys)", "transpose_qkv(self.W_v(keys)"),
         ("transpose_qkv(self.W_v(values)", "transpose_qkv(self.W_k(values)")]},
     "caught_by": set(_MHA_ALL)},
    {"id": "init_key_value_sizes_swapped",
     "mistake": "构造 W_k、W_v 时把 key_size 和 value_size 写反（两者相等时看不出来）",
     "edits": {"multihead_attention": [
         ("nn.Linear(key_size, num_hiddens", "nn.Linear(VALUE_SIZE, num_hiddens"),
         ("nn.Linear(value_size, num_hiddens", "nn.Linear(key_size, num_hiddens"),
         ("nn.Linear(VALUE_SIZE, num_hiddens", "nn.Linear(value_size, num_hiddens")]},
     "caught_by": {"test_mha_kv_sizes"}},
    {"id": "W_k_built_with_query_size",
     "mistake": "W_k 用 query_size 作输入维度（key_size 等于 query_size 时看不出来）",
     "edits": {"multihead_attention": [("nn.Linear(key_size, num_hiddens", "nn.Linear(query_size, num_hiddens")]},
     "caught_by": {"test_mha_kv_sizes", "test_mha_param_count"}},
    {"id": "bias_always_on",
     "mistake": "忽略 bias 参数，线性层总带偏置",
     "edits": {"multihead_attention": [
         ("self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)", "self.W_q = nn.Linear(query_size, num_hiddens)"),
         ("self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)", "self.W_k = nn.Linear(key_size, num_hiddens)"),
         ("self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)", "self.W_v = nn.Linear(value_size, num_hiddens)"),
         ("self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)", "self.W_o = nn.Linear(num_hiddens, num_hiddens)")]},
     "caught_by": {"test_mha_param_count"}},
    {"id": "W_o_back_to_query_size",
     "mistake": "以为输出要回到输入维度，W_o 写成 num_hiddens → query_size",
     "edits": {"multihead_attention": [
         ("nn.Linear(num_hiddens, num_hiddens, bias=bias)", "nn.Linear(num_hiddens, query_size, bias=bias)")]},
     "caught_by": {"test_mha_shapes"}},
    {"id": "own_attention_correct",
     "mistake": "（不是错误）自己写注意力模块而不用 d2l.DotProductAttention：应得满分",
     "edits": _own(),
     "caught_by": set()},
    {"id": "scale_by_num_hiddens",
     "mistake": "自己写的注意力按 sqrt(num_hiddens) 而不是 sqrt(每个头的维度) 缩放",
     "edits": _own(("self.attention = MyDotProductAttention(dropout)",
                    "self.attention = MyDotProductAttention(dropout)\n        self.attention.scale_dim = num_hiddens"),
                   ("/ math.sqrt(d)", "/ math.sqrt(getattr(self, 'scale_dim', d))")),
     "caught_by": set(_MHA_ALL)},
    {"id": "dropout_ignores_eval",
     "mistake": "自己写的注意力用 F.dropout(x, p) 而不是 nn.Dropout：eval() 下仍在暂退",
     "edits": _own(("torch.bmm(self.dropout(self.attention_weights), values)",
                    "torch.bmm(F.dropout(self.attention_weights, self.dropout.p), values)")),
     "caught_by": {"test_mha_vs_torch"}},
    {"id": "mask_built_on_cpu",
     "mistake": "在 forward 中用 torch.arange(n) 在 CPU 上构造掩码（只在 GPU 上出错）",
     "needs_cuda": True,
     "edits": _own(("torch.arange(keys.shape[1], device=scores.device)", "torch.arange(keys.shape[1])")),
     "caught_by": {"test_mha_shapes", "test_mha_valid_lens", "test_mha_kv_sizes"}},
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
]
