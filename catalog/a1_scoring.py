"""Catalog of assignment a1_scoring (注意力评分函数与掩蔽 softmax).

LECTURER: the code of the lecturer's deck (seed 003), verbatim: `masked_softmax` built on
`d2l.sequence_mask` (it writes -1e6 into X in place; the text leaves in-place writes open),
`AdditiveAttention` and `DotProductAttention`. The extension and the experiment keep the source solution.

ALSO_CORRECT["deck"]: the code the unit-1 deck teaches (`masked_softmax`, `AdditiveAttention`,
`DotProductAttention`), read from `notebooks/01_attention_scoring.ipynb` when the catalog is loaded, so that it
cannot drift from the deck.

VARIANTS: realistic mistakes, each with the exact set of test cells that must lose points. Every hidden
test cell has at least one variant that only it catches, and a mistake in `masked_softmax` costs only the
`masked_softmax` cells (the class tests swap in a reference). Variants with `caught_by=set()` are correct
answers that the text leaves open, kept to prove the tests do not punish them. The forbidden shortcuts
(`d2l.masked_softmax`, `d2l.AdditiveAttention`, `d2l.DotProductAttention`, `F.scaled_dot_product_attention`),
aliased or wrapped, lose every test cell of their question and nothing else.
"""

from attncourse.grading.deck_code import deck_definitions

NOTEBOOK = "scoring"

LECTURER = {
    "masked_softmax": '''#@save
def masked_softmax(X, valid_lens):
    """通过在最后一个轴上掩蔽元素来执行softmax操作"""
    # X:3D张量，valid_lens:1D或2D张量
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    else:
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        # 最后一轴上被掩蔽的元素使用一个非常大的负值替换，从而其softmax输出为0
        X = d2l.sequence_mask(X.reshape(-1, shape[-1]), valid_lens,
                              value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)''',
    "additive_attention": '''#@save
class AdditiveAttention(nn.Module):
    """加性注意力"""
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super(AdditiveAttention, self).__init__(**kwargs)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = queries.unsqueeze(2) + keys.unsqueeze(1)
        features = torch.tanh(features)
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)''',
    "dot_product_attention": '''#@save
class DotProductAttention(nn.Module):
    """缩放点积注意力"""
    def __init__(self, dropout, **kwargs):
        super(DotProductAttention, self).__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1,2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)''',
}


# ---------------------------------------------------------------------------------------------------------------
# the deck's code, read from the deck

ALSO_CORRECT = {}
_DECK = deck_definitions(__file__, "notebooks/01_attention_scoring.ipynb",
                         {"masked_softmax": "masked_softmax", "AdditiveAttention": "additive_attention",
                          "DotProductAttention": "dot_product_attention"})
if _DECK:
    ALSO_CORRECT["deck"] = _DECK

# causal masking beyond the lecture, written two other honest ways
ALSO_CORRECT["causal_tril"] = {"causal_masked_softmax": '''def causal_masked_softmax(X, valid_lens=None):
    q, k = X.shape[-2:]
    mask = torch.ones(q, k, dtype=torch.bool, device=X.device).tril(diagonal=k - q)  # 右下对齐的下三角
    if valid_lens is not None:
        lens = valid_lens.unsqueeze(-1) if valid_lens.dim() == 1 else valid_lens
        mask = mask & (torch.arange(k, device=X.device) < lens.unsqueeze(-1))
    scores = X.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)'''}
ALSO_CORRECT["causal_loop"] = {"causal_masked_softmax": '''def causal_masked_softmax(X, valid_lens=None):
    out = torch.zeros_like(X)
    q, k = X.shape[-2:]
    for b in range(X.shape[0]):
        for i in range(q):
            n = k - q + i + 1  # 这个查询因果上能看的键数
            if valid_lens is not None:
                limit = valid_lens[b] if valid_lens.dim() == 1 else valid_lens[b, i]
                n = min(n, int(limit))
            out[b, i, :n] = F.softmax(X[b, i, :n], dim=-1)
    return out'''}

# ---------------------------------------------------------------------------------------------------------------
# mistakes

MS_BASIC, MS_2D = "test_masked_softmax_basic", "test_masked_softmax_2d"
ADD, ADD_DROP = "test_additive_attention", "test_additive_attention_dropout"
DOT, SDPA = "test_dot_product_attention", "test_dot_product_sdpa"
BIL, VAR = "test_bilinear_attention", "test_variance_experiment"
CAUSAL, CAUSAL_LENS = "test_causal_masked_softmax", "test_causal_masked_softmax_valid_lens"
KEEP = "keep = keys[None, :] <= positions[:, None]"

FILL = "torch.finfo(X.dtype).min"
ADD_TAIL = ("self.attention_weights = masked_softmax(scores, valid_lens)\n"
            "        return torch.bmm(self.dropout(self.attention_weights), values)")
DOT_FORWARD = ("        d = queries.shape[-1]\n"
               "        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)\n"
               "        self.attention_weights = masked_softmax(scores, valid_lens)\n"
               "        return torch.bmm(self.dropout(self.attention_weights), values)")
BIL_FORWARD = ("        scores = queries @ self.W @ keys.transpose(1, 2)\n"
               "        self.attention_weights = masked_softmax(scores, valid_lens)\n"
               "        return torch.bmm(self.dropout(self.attention_weights), values)")

# an answer that builds the boolean mask itself and hands the rest to F.scaled_dot_product_attention
_SDPA_CALL = """        keep = None
        if valid_lens is not None:
            lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
            keep = torch.arange(keys.shape[1], device=keys.device) < lens[..., None]
        self.attention_weights = masked_softmax(scores, valid_lens)
        p = self.dropout.p if self.training else 0.0
        return {call}"""

# AdditiveAttention handing the work to d2l's (its LazyLinear layers replaced by the required ones)
_D2L_ADDITIVE = '''class AdditiveAttention(nn.Module):
    """加性注意力：借用 d2l 的实现"""
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.inner = d2l.AdditiveAttention(num_hiddens, dropout)
        self.inner.W_k, self.inner.W_q, self.inner.w_v = self.W_k, self.W_q, self.w_v

    def forward(self, queries, keys, values, valid_lens):
        out = self.inner(queries, keys, values, valid_lens)
        self.attention_weights = self.inner.attention_weights
        return out'''

VARIANTS = [
    # ------------------------------------------------------------------ masked_softmax
    {"id": "ms_fill_zero", "mistake": "掩蔽位置填 0 而不是很大的负数：填充的键仍分到权重",
     "edits": {"masked_softmax": [(FILL, "0")]},
     "caught_by": {MS_BASIC, MS_2D}},
    {"id": "ms_wrong_dim", "mistake": "在错误的维度（dim=1，查询所在的轴）上做 softmax",
     "edits": {"masked_softmax": [("return F.softmax(X, dim=-1)  # 被掩蔽", "return F.softmax(X, dim=1)  # 被掩蔽")]},
     "caught_by": {MS_BASIC, MS_2D}},
    {"id": "ms_off_by_one", "mistake": "掩码差一位：用 <= 而不是 <，第 valid_len 个键也被保留",
     "edits": {"masked_softmax": [("positions < valid_lens", "positions <= valid_lens")]},
     "caught_by": {MS_BASIC, MS_2D}},
    {"id": "ms_2d_first_column", "mistake": "忽略二维 valid_lens：只用每个样本第一个查询的有效长度",
     "edits": {"masked_softmax": [
         ("valid_lens = valid_lens[:, None]  # (批量大小, 1)：同一样本的所有查询共用一个有效长度",
          "valid_lens = valid_lens[:, None]\n    else:\n        valid_lens = valid_lens[:, :1]  # 只看了第一列")]},
     "caught_by": {MS_2D}},
    {"id": "ms_repeat_not_interleave", "mistake": "一维 valid_lens 用 repeat 而不是 repeat_interleave 展开（批量大小为 1 时看不出来）",
     "cells": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    """通过在最后一个轴上掩蔽元素来执行 softmax 操作"""
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.repeat(shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = d2l.sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return F.softmax(X.reshape(shape), dim=-1)'''},
     "caught_by": {MS_BASIC}},
    {"id": "ms_manual_softmax_overflow", "mistake": "手写 softmax：exp(X) 乘掩码再归一化，没有减去最大值，分数很大时溢出成 inf/NaN",
     "cells": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    """通过在最后一个轴上掩蔽元素来执行 softmax 操作"""
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    mask = torch.arange(X.shape[-1], device=X.device) < valid_lens[..., None]
    e = torch.exp(X) * mask
    return e / e.sum(dim=-1, keepdim=True)'''},
     "caught_by": {MS_BASIC}},
    {"id": "ms_arange_on_cpu", "mistake": "在函数里用 torch.arange(n) 在 CPU 上生成掩码：GPU 上设备不匹配而报错",
     "edits": {"masked_softmax": [("torch.arange(X.shape[-1], device=X.device)", "torch.arange(X.shape[-1])")]},
     "caught_by": {MS_BASIC, MS_2D}, "needs_cuda": True},
    {"id": "ms_fill_minus_1e9", "mistake": "用 masked_fill(mask, -1e9) 填充：float16 放不下 -1e9，float16 的测试报错",
     "edits": {"masked_softmax": [(FILL, "-1e9")]},
     "caught_by": {MS_BASIC, MS_2D}},
    {"id": "ms_not_implemented", "mistake": "没写 masked_softmax（留着 raise NotImplementedError()），后面各类写对了：只丢 masked_softmax 的分",
     "cells": {"masked_softmax": 'def masked_softmax(X, valid_lens):\n    # 请在此处编写你的代码\n    raise NotImplementedError()'},
     "caught_by": {MS_BASIC, MS_2D}},
    {"id": "ms_alias_d2l", "mistake": "用题目禁止的 d2l.masked_softmax 作答：masked_softmax = d2l.masked_softmax",
     "cells": {"masked_softmax": "masked_softmax = d2l.masked_softmax\n"},
     "caught_by": {MS_BASIC, MS_2D}},
    {"id": "ms_wrap_d2l", "mistake": "把题目禁止的 d2l.masked_softmax 包进自己的函数（先复制 X，避免改写输入）",
     "cells": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    """掩蔽 softmax"""
    return d2l.masked_softmax(X.clone(), valid_lens)'''},
     "caught_by": {MS_BASIC, MS_2D}},
    {"id": "ms_fill_minus_inf_ok", "mistake": "（正确）用 -inf 填充：有效长度为 0 的行会变成 NaN，但题目说明不测试这种行",
     "edits": {"masked_softmax": [(FILL, 'float("-inf")')]},
     "caught_by": set()},
    {"id": "ms_in_place_ok", "mistake": "（正确）原地改写 X（X[~mask] = -1e6）：题目说明不检查是否修改传入的 X",
     "edits": {"masked_softmax": [("X = X.masked_fill(~mask, torch.finfo(X.dtype).min)",
                                   "X[~mask.expand(X.shape)] = -1e6")]},
     "caught_by": set()},
    # ------------------------------------------------------------------ AdditiveAttention
    {"id": "add_relu", "mistake": "加性注意力用 ReLU 而不是 tanh 作激活函数",
     "edits": {"additive_attention": [("torch.tanh(", "torch.relu(")]},
     "caught_by": {ADD}},
    {"id": "add_bias", "mistake": "加性注意力的 W_q、W_k 带偏置（忘了 bias=False）",
     "edits": {"additive_attention": [
         ("nn.Linear(key_size, num_hiddens, bias=False)", "nn.Linear(key_size, num_hiddens)"),
         ("nn.Linear(query_size, num_hiddens, bias=False)", "nn.Linear(query_size, num_hiddens)")]},
     "caught_by": {ADD}},
    {"id": "add_relu_and_bias", "mistake": "加性注意力既用 ReLU，W_q、W_k 又带偏置",
     "edits": {"additive_attention": [
         ("torch.tanh(", "torch.relu("),
         ("nn.Linear(key_size, num_hiddens, bias=False)", "nn.Linear(key_size, num_hiddens)"),
         ("nn.Linear(query_size, num_hiddens, bias=False)", "nn.Linear(query_size, num_hiddens)")]},
     "caught_by": {ADD}},
    {"id": "add_broadcast_swapped", "mistake": "广播时把 unsqueeze 的轴放反：queries.unsqueeze(1) + keys.unsqueeze(2)，查询和键的位置对调",
     "edits": {"additive_attention": [("queries.unsqueeze(2) + keys.unsqueeze(1)", "queries.unsqueeze(1) + keys.unsqueeze(2)")]},
     "caught_by": {ADD, ADD_DROP}},
    {"id": "add_dropout_ignores_eval", "mistake": "用 F.dropout(w, p) 而没传 training=self.training：eval() 模式下仍在丢弃",
     "edits": {"additive_attention": [
         ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
         ("self.dropout(self.attention_weights)", "F.dropout(self.attention_weights, self.p)")]},
     "caught_by": {ADD_DROP}},
    {"id": "add_store_after_dropout", "mistake": "保存的是暂退法之后的权重（self.attention_weights = dropout(softmax)）",
     "edits": {"additive_attention": [(ADD_TAIL,
         "self.attention_weights = self.dropout(masked_softmax(scores, valid_lens))\n"
         "        return torch.bmm(self.attention_weights, values)")]},
     "caught_by": {ADD_DROP}},
    {"id": "add_no_attention_weights", "mistake": "没有把注意力权重保存到 self.attention_weights",
     "edits": {"additive_attention": [(ADD_TAIL,
         "attention_weights = masked_softmax(scores, valid_lens)\n"
         "        return torch.bmm(self.dropout(attention_weights), values)")]},
     "caught_by": {ADD, ADD_DROP}},
    {"id": "add_swap_keys_values", "mistake": "forward 的参数顺序写成 (queries, values, keys, ...)：键和值对调",
     "edits": {"additive_attention": [("def forward(self, queries, keys, values, valid_lens):",
                                       "def forward(self, queries, values, keys, valid_lens):")]},
     "caught_by": {ADD, ADD_DROP}},
    {"id": "add_sizes_swapped", "mistake": "W_q 按 key_size、W_k 按 query_size 构造：两个尺寸对调（查询与键一样宽时看不出来）",
     "edits": {"additive_attention": [("self.W_k = nn.Linear(key_size", "self.W_k = nn.Linear(query_size"),
                                      ("self.W_q = nn.Linear(query_size", "self.W_q = nn.Linear(key_size")]},
     "caught_by": {ADD, ADD_DROP}},
    {"id": "add_alias_d2l", "mistake": "用题目禁止的 d2l.AdditiveAttention 作答：AdditiveAttention = d2l.AdditiveAttention（构造参数也对不上）",
     "cells": {"additive_attention": "AdditiveAttention = d2l.AdditiveAttention\n"},
     "caught_by": {ADD, ADD_DROP}},
    {"id": "add_wrap_d2l", "mistake": "把题目禁止的 d2l.AdditiveAttention 包一层：换上题目要求的全连接层，计算交给它",
     "cells": {"additive_attention": _D2L_ADDITIVE},
     "caught_by": {ADD, ADD_DROP}},
    # ------------------------------------------------------------------ DotProductAttention
    {"id": "dot_no_scaling", "mistake": "忘了除以 √d",
     "edits": {"dot_product_attention": [(" / math.sqrt(d)", "")]},
     "caught_by": {DOT, SDPA}},
    {"id": "dot_scale_by_d", "mistake": "除以 d 而不是 √d",
     "edits": {"dot_product_attention": [("math.sqrt(d)", "d")]},
     "caught_by": {DOT, SDPA}},
    {"id": "dot_scale_by_value_dim", "mistake": "用值的维度开方来缩放（只有值的维度与 d 不同时才看得出）",
     "edits": {"dot_product_attention": [("d = queries.shape[-1]", "d = values.shape[-1]")]},
     "caught_by": {DOT, SDPA}},
    {"id": "dot_dropout_ignores_eval", "mistake": "用 F.dropout(w, p) 而没传 training=self.training：eval() 模式下仍在丢弃",
     "edits": {"dot_product_attention": [
         ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
         ("self.dropout(self.attention_weights)", "F.dropout(self.attention_weights, self.p)")]},
     "caught_by": {SDPA}},
    {"id": "dot_no_default_valid_lens", "mistake": "forward 的 valid_lens 没有默认值 None：不传 valid_lens 时报错",
     "edits": {"dot_product_attention": [("valid_lens=None):", "valid_lens):")]},
     "caught_by": {DOT}},
    {"id": "dot_weights_keys", "mistake": "用权重对键而不是对值加权求和（bmm 的第二个参数写成 keys）",
     "edits": {"dot_product_attention": [("self.dropout(self.attention_weights), values)",
                                          "self.dropout(self.attention_weights), keys)")]},
     "caught_by": {DOT, SDPA}},
    {"id": "dot_ignores_valid_lens", "mistake": "收到了 valid_lens 却没有交给 masked_softmax：从不掩蔽，不传 valid_lens 时全对",
     "edits": {"dot_product_attention": [("masked_softmax(scores, valid_lens)", "masked_softmax(scores, None)")]},
     "caught_by": {DOT, SDPA}},
    {"id": "dot_self_attention_only", "mistake": "以为是自注意力：分数和加权求和都只用 queries，传入的 keys、values 没有用上",
     "edits": {"dot_product_attention": [("torch.bmm(queries, keys.transpose(1, 2))", "torch.bmm(queries, queries.transpose(1, 2))"),
                                          ("self.dropout(self.attention_weights), values)",
                                           "self.dropout(self.attention_weights), queries)")]},
     "caught_by": {DOT, SDPA}},
    {"id": "dot_alias_d2l", "mistake": "用题目禁止的 d2l.DotProductAttention 作答：DotProductAttention = d2l.DotProductAttention（结果是对的）",
     "cells": {"dot_product_attention": "DotProductAttention = d2l.DotProductAttention\n"},
     "caught_by": {DOT, SDPA}},
    {"id": "dot_sdpa_wrapped", "mistake": "权重用 masked_softmax 算并保存，输出却交给题目禁止的 F.scaled_dot_product_attention（结果是对的）",
     "edits": {"dot_product_attention": [(DOT_FORWARD,
         "        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])\n"
         + _SDPA_CALL.format(call="F.scaled_dot_product_attention(queries, keys, values, attn_mask=keep, dropout_p=p)"))]},
     "caught_by": {DOT, SDPA}},
    {"id": "dot_sdpa_alias", "mistake": "给 torch.nn.functional.scaled_dot_product_attention 起个别名再调用",
     "edits": {"dot_product_attention": [
         ("class DotProductAttention(nn.Module):",
          "attend = torch.nn.functional.scaled_dot_product_attention\n\n\nclass DotProductAttention(nn.Module):"),
         (DOT_FORWARD,
          "        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])\n"
          + _SDPA_CALL.format(call="attend(queries, keys, values, attn_mask=keep, dropout_p=p)"))]},
     "caught_by": {DOT, SDPA}},
    # ------------------------------------------------------------------ BilinearAttention
    {"id": "bil_plain_tensor", "mistake": "W 用普通张量而不是 nn.Parameter：没有注册为参数，训练不到",
     "edits": {"bilinear_attention": [("nn.Parameter(torch.randn(query_size, key_size) * 0.1)",
                                       "torch.randn(query_size, key_size) * 0.1")]},
     "caught_by": {BIL}},
    {"id": "bil_scaled", "mistake": "照搬点积注意力，多除了 √key_size（题目要求不缩放）",
     "edits": {"bilinear_attention": [("keys.transpose(1, 2)\n", "keys.transpose(1, 2) / math.sqrt(keys.shape[-1])\n")]},
     "caught_by": {BIL}},
    {"id": "bil_w_transposed", "mistake": "W 的形状写成 (key_size, query_size)，前向里再转置",
     "edits": {"bilinear_attention": [("torch.randn(query_size, key_size)", "torch.randn(key_size, query_size)"),
                                      ("queries @ self.W @", "queries @ self.W.T @")]},
     "caught_by": {BIL}},
    {"id": "bil_loop_ok", "mistake": "（正确）逐个（查询，键）对循环计算 q^T W k：慢，但题目不规定写法",
     "edits": {"bilinear_attention": [("scores = queries @ self.W @ keys.transpose(1, 2)\n",
         "scores = torch.stack([torch.stack([torch.stack([q @ self.W @ k for k in keys[b]]) for q in queries[b]])\n"
         "                              for b in range(queries.shape[0])])\n")]},
     "caught_by": set()},
    {"id": "bil_sdpa_wrapped", "mistake": "把 Q W 当作查询交给题目禁止的 F.scaled_dot_product_attention，并传 scale=1.0 取消缩放（结果是对的）",
     "edits": {"bilinear_attention": [(BIL_FORWARD,
         "        scores = queries @ self.W @ keys.transpose(1, 2)\n"
         + _SDPA_CALL.format(call="F.scaled_dot_product_attention(queries @ self.W, keys, values, attn_mask=keep, "
                                  "dropout_p=p, scale=1.0)"))]},
     "caught_by": {BIL}},
    {"id": "bil_d2l_dot_wrapped", "mistake": "把 Q W 乘以 √key_size 后交给题目禁止的 d2l.DotProductAttention，抵消它的缩放（结果是对的）",
     "edits": {"bilinear_attention": [
         ("self.dropout = nn.Dropout(dropout)", "self.inner = d2l.DotProductAttention(dropout)"),
         (BIL_FORWARD,
          "        out = self.inner(queries @ self.W * math.sqrt(keys.shape[-1]), keys, values, valid_lens)\n"
          "        self.attention_weights = self.inner.attention_weights\n"
          "        return out")]},
     "caught_by": {BIL}},
    # ------------------------------------------------------------------ experiment
    {"id": "var_sigma_one", "mistake": "照搬讲义的实验：按 σ = 1 采样，理论值也写 d（自洽，但不是题目要求的 σ = 2）",
     "edits": {"variance_experiment": [("d, sigma, num_samples = 256, 2.0, 10000", "d, sigma, num_samples = 256, 1.0, 10000")]},
     "caught_by": {VAR}},
    {"id": "var_theory_sigma_squared", "mistake": "推导错成 Var(q^T k) = dσ²（每一项的方差当成 σ²）",
     "edits": {"variance_experiment": [("var_theory = d * sigma ** 4", "var_theory = d * sigma ** 2")]},
     "caught_by": {VAR}},
    {"id": "var_std_not_var", "mistake": "算的是标准差而不是方差",
     "edits": {"variance_experiment": [("dots.var().item()", "dots.std().item()"),
                                       ("math.sqrt(d)).var().item()", "math.sqrt(d)).std().item()")]},
     "caught_by": {VAR}},
    {"id": "var_divide_by_d", "mistake": "缩放时除以 d 而不是 √d",
     "edits": {"variance_experiment": [("(dots / math.sqrt(d))", "(dots / d)")]},
     "caught_by": {VAR}},
    {"id": "var_uniform", "mistake": "用 torch.rand（[0, 1) 上的均匀分布）而不是 torch.randn 采样",
     "edits": {"variance_experiment": [("q = torch.randn(", "q = torch.rand("), ("k = torch.randn(", "k = torch.rand(")]},
     "caught_by": {VAR}},
    {"id": "dot_no_dropout", "mistake": "定义了 self.dropout 却没用：训练模式下没有暂退法",
     "edits": {"dot_product_attention": [("torch.bmm(self.dropout(self.attention_weights), values)",
                                          "torch.bmm(self.attention_weights, values)")]},
     "caught_by": {SDPA}},
    {"id": "dot_store_after_dropout", "mistake": "self.attention_weights 存的是暂退法之后的权重",
     "edits": {"dot_product_attention": [
         ("self.attention_weights = masked_softmax(scores, valid_lens)\n        return torch.bmm(self.dropout(self.attention_weights), values)",
          "self.attention_weights = self.dropout(masked_softmax(scores, valid_lens))\n        return torch.bmm(self.attention_weights, values)")]},
     "caught_by": {SDPA}},
    {"id": "causal_aligned_to_start", "mistake": "查询数少于键数时，把查询当成序列的前 q 个位置（掩码左上对齐）",
     "edits": {"causal_masked_softmax": [("torch.arange(num_queries, device=X.device) + (num_keys - num_queries)",
                                          "torch.arange(num_queries, device=X.device)")]},
     "caught_by": {CAUSAL, CAUSAL_LENS}},
    {"id": "causal_sees_future", "mistake": "方向反了：保留的是对角线之后的键（看未来，不看过去）",
     "edits": {"causal_masked_softmax": [(KEEP, "keep = keys[None, :] >= positions[:, None]")]},
     "caught_by": {CAUSAL, CAUSAL_LENS}},
    {"id": "causal_strict", "mistake": "差一位：用 < 而不是 <=，查询看不到自己",
     "edits": {"causal_masked_softmax": [(KEEP, "keep = keys[None, :] < positions[:, None]")]},
     "caught_by": {CAUSAL, CAUSAL_LENS}},
    {"id": "causal_manual_softmax_overflow", "mistake": "手写 exp 再归一化：分数很大时上溢成 inf/NaN",
     "edits": {"causal_masked_softmax": [
         ("return F.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)",
          "e = torch.exp(X) * keep\n    return e / e.sum(dim=-1, keepdim=True)")]},
     "caught_by": {CAUSAL}},
    {"id": "causal_ignores_valid_lens", "mistake": "只做因果掩蔽，忘了有效长度",
     "edits": {"causal_masked_softmax": [("keep = keep & (keys < valid_lens[..., None])", "pass")]},
     "caught_by": {CAUSAL_LENS}},
    {"id": "causal_union", "mistake": "两个条件取“或”而不是“且”：满足其中一个的键就参与",
     "edits": {"causal_masked_softmax": [("keep = keep & (keys < valid_lens[..., None])",
                                          "keep = keep | (keys < valid_lens[..., None])")]},
     "caught_by": {CAUSAL_LENS}},
    {"id": "causal_fill_minus_1e9", "mistake": "用 -1e9 填充：float16 放不下，float16 的测试报错",
     "edits": {"causal_masked_softmax": [("torch.finfo(X.dtype).min", "-1e9")]},
     "caught_by": {CAUSAL, CAUSAL_LENS}},
]

# ---------------------------------------------------------------------------------------------------------------
# misconceptions: what a mistake says the student misunderstood, and the deck slide that teaches it
# (label, hint, slide title); the grader names one when a failed test's outputs are that mistake's
# (attncourse.grading.run.diagnosis). TWINS: the same mistakes written differently, as a student would.

DECK = "notebooks/01_attention_scoring.ipynb"
_MASKING, _LENS_SHAPES = "掩蔽 softmax 的做法", "`valid_lens` 的两种形状"
_WHY_SQRT_D = "为什么要除以 $\\sqrt{d}$？"
_DECK_3 = "notebooks/03_mqa_gqa.ipynb"  # where causal self-attention is taught
_CAUSAL_SLIDE = ("因果自注意力：整段一次算完", _DECK_3)
_STORED_AFTER_DROPOUT = "保存的注意力权重是暂退法之后的"
_STORED_HINT = ("self.attention_weights 是给人看的（热图）与检查用的，应是 softmax 的结果：每行之和为 1。"
                "暂退法只作用在与值相乘的那一份上，保存的权重不经过它。")
_DROPOUT_IN_EVAL = "暂退法在 eval() 模式下仍在起作用"
_DROPOUT_IN_EVAL_HINT = ("症状：调用 eval() 之后，同样的输入两次调用得到不同的结果。试一试：`x = torch.ones(6)`，再 "
                         "`print(F.dropout(x, 0.5), nn.Dropout(0.5).eval()(x))`：两种写法里，哪一种随 eval() 关掉了？")
_OVERFLOW = ("手写的 softmax 在分数很大时上溢", "症状：分数不大时全对，分数上百时权重里出现 NaN（非数）：exp 上溢（overflow）了。"
             "试一试：`x = torch.tensor([100.0, 101.0])`，再 `print(x.exp(), x.exp() / x.exp().sum())`：float32 "
             "能表示的最大数约是 3.4e38，e¹⁰⁰ 放得下吗？数学上每个权重都在 0 和 1 之间，算出来的是什么？", _MASKING)
MISCONCEPTIONS = {
    "ms_fill_zero": ("被掩蔽的位置填了 0", "症状：被掩蔽的键的权重不是 0，而是和分数为 0 的键一样大。试一试："
                     "`print(F.softmax(torch.tensor([2.0, 0.0, 0.0]), dim=-1))`：若后两个位置是被“填 0”掩蔽的键，"
                     "它们分到了多少权重？softmax 之前要填一个什么样的数，之后才是 0？", _MASKING),
    "ms_wrong_dim": ("softmax 做在了查询所在的维度上", "症状：权重按列之和为 1，每个查询（每一行）的权重之和却不是 1。"
                     "试一试：`w = masked_softmax(torch.rand(1, 2, 3), None)`，再 `print(w.sum(2), w.sum(1))`："
                     "哪一个全是 1？每个查询对所有键的权重之和应为 1。", _MASKING),
    "ms_off_by_one": ("有效长度差了一位：第 valid_len 个键也参与了", "症状：有效长度为 n 时，第 n 个键（从 0 数）也分到了权重。"
                      "试一试：`print(masked_softmax(torch.zeros(1, 1, 4), torch.tensor([2])))`：有效长度为 2 时，"
                      "应只有前两个键各得 0.5，你的结果是什么？", _MASKING),
    "ms_2d_first_column": ("二维 valid_lens 只用了每个样本第一个查询的有效长度", "症状：一维 valid_lens 全对，二维时同一个样本的"
                           "所有查询都用了同一个有效长度。试一试：`print(masked_softmax(torch.zeros(1, 2, 3), torch.tensor([[1, 3]])))`："
                           "第二个查询的有效长度是 3，它看了几个键？", _LENS_SHAPES),
    "ms_repeat_not_interleave": ("一维 valid_lens 被平铺，而不是逐项重复", "症状：批量为 1、或各样本的有效长度相同时全对。"
                                 "试一试：`lens = torch.tensor([1, 3])`，再 `print(lens.repeat(2))`（批量 2、每个样本 2 个查询，"
                                 "展开成 4 行）：样本 0 的两个查询都应该用 1，拿到的是什么？", _LENS_SHAPES),
    "add_relu": ("加性注意力的激活函数用了 ReLU", "症状：与参考结果相比，隐藏单元的负值都变成了 0。试一试："
                 "`x = torch.tensor([-2.0, 0.5])`，再 `print(torch.relu(x))`：负的特征去哪了？对照讲义的评分函数，"
                 "看它用的是哪一个激活函数。", "加性注意力（additive attention）"),
    "dot_no_scaling": ("缩放点积注意力忘了缩放", "症状：d 越大，权重越接近只有一个 1（softmax 饱和）。试一试："
                       "`q, k = torch.randn(1000, 64), torch.randn(1000, 64)`，再 `print((q * k).sum(-1).var())`："
                       "d = 64 时点积的方差约是多少？要让它回到 1 左右，该除以什么？", _WHY_SQRT_D),
    "dot_scale_by_d": ("缩放因子用了 d 本身", "症状：权重比参考的更平均（分数缩得太小）。试一试："
                       "`q, k = torch.randn(1000, 64), torch.randn(1000, 64)`，再 `print(((q * k).sum(-1) / 64).var())`："
                       "缩放之后的方差应约为 1，你的是多少？", _WHY_SQRT_D),
    "dot_scale_by_value_dim": ("用值的维度来缩放", "症状：值的维度与查询、键的长度相同时全对，不同时出错。试一试："
                               "`a, q = DotProductAttention(0.0).eval(), torch.randn(1, 2, 4)`，再 "
                               "`a(q, q, torch.randn(1, 2, 2)); w = a.attention_weights; a(q, q, torch.randn(1, 2, 8)); print(w - a.attention_weights)`："
                               "只换了值，权重应该变吗？", "`DotProductAttention`"),
    "dot_weights_keys": ("用注意力权重对键而不是对值加权", "注意力汇聚的输出是值的加权平均：权重乘的是值，不是键。",
                         "注意力汇聚：值的加权平均"),
    "add_store_after_dropout": (_STORED_AFTER_DROPOUT, _STORED_HINT, "`AdditiveAttention`"),
    "dot_store_after_dropout": (_STORED_AFTER_DROPOUT, _STORED_HINT, "`DotProductAttention`"),
    "add_dropout_ignores_eval": (_DROPOUT_IN_EVAL, _DROPOUT_IN_EVAL_HINT, "`AdditiveAttention`"),
    "dot_dropout_ignores_eval": (_DROPOUT_IN_EVAL, _DROPOUT_IN_EVAL_HINT, "`DotProductAttention`"),
    "dot_no_dropout": ("注意力权重没有经过暂退法", "训练模式下，暂退法作用在注意力权重上，在它与值相乘之前："
                       "在 __init__ 里定义了 nn.Dropout，还要在前向计算中用上。", "`DotProductAttention`"),
    "causal_sees_future": ("因果掩蔽的方向反了：查询看的是它之后的键", "症状：权重矩阵是上三角的。试一试："
                           "`print(causal_masked_softmax(torch.zeros(1, 3, 3))[0])`：第 0 个查询是序列的第一个词元，"
                           "它能看哪几个键？你的结果里它看了哪几个？", *_CAUSAL_SLIDE),
    "causal_strict": ("因果掩蔽差了一位：查询看不到自己", "症状：对角线上的权重是 0，第 0 个查询一个键也没有（全是 0 或 NaN）。"
                      "试一试：`print(causal_masked_softmax(torch.zeros(1, 3, 3))[0])`：第 0 个查询至少要能看一个键，"
                      "是哪一个？", *_CAUSAL_SLIDE),
    "causal_aligned_to_start": ("查询数少于键数时，把查询当成了序列开头的几个位置（掩码与左上角对齐）",
                                "症状：查询数等于键数时全对，查询少于键数时最后一个查询没有看到全部的键。PyTorch 的 "
                                "F.scaled_dot_product_attention(..., is_causal=True) 正是这样对齐的，试一试："
                                "`q, k = torch.randn(1, 1, 1, 4), torch.randn(1, 1, 3, 4)`，再 "
                                "`print(F.scaled_dot_product_attention(q, k, k, is_causal=True) - k[..., :1, :])`："
                                "差为 0，这唯一的查询只看了第 0 个键。解码时新来的查询是序列最后的几个位置。",
                                "用 KV 缓存时，第 $t$ 步做什么", _DECK_3),
    "causal_ignores_valid_lens": ("只做了因果掩蔽，忘了有效长度", "症状：不给 valid_lens 时全对，给了之后结果不变，填充的键"
                                  "照样分到权重。试一试：`print(causal_masked_softmax(torch.zeros(1, 3, 3), torch.tensor([1]))[0])`："
                                  "有效长度为 1 时，每个查询应只看第 0 个键。", _MASKING),
    "causal_union": ("因果掩码与有效长度取了“或”", "症状：填充的键和“未来”的键都分到了权重。试一试："
                     "`print(causal_masked_softmax(torch.zeros(1, 2, 3), torch.tensor([3])))`：第 0 个查询（位置 1）"
                     "应只看前 2 个键，有效长度 3 不会让它看到未来，你的结果呢？", _MASKING),
    "bil_scaled": ("双线性评分多了一个缩放", "症状：分数都比参考的小同一个倍数，权重更平。试一试：把你的模块的 W 设成单位矩阵，"
                   "用 `q = k = torch.ones(1, 1, 4)` 算出 attention_weights 之前的分数，再与 `q @ k.transpose(1, 2)`（= 4）比较："
                   "题目的评分函数 qᵀWk 里有除法吗？", "两种评分函数对比"),
    "bil_w_transposed": ("双线性注意力的 W 形状写反了", "症状：self.W 的形状是 (key_size, query_size)，"
                         "与 qᵀWk 对不上。试一试：`print(BilinearAttention(query_size=3, key_size=2, dropout=0.0).W.shape)`："
                         "qᵀWk 里 qᵀ 是 1×3、k 是 2×1，夹在中间的 W 应有几行几列？", "练习"),
    "bil_plain_tensor": ("W 没有成为模块的参数", "症状：W 不在模块的参数（parameter）里，优化器（optimizer）拿不到它，训练时它不会更新"
                         "（设了 requires_grad 也一样）。试一试：`a = BilinearAttention(3, 2, 0.0)`，再 "
                         "`print([name for name, _ in a.named_parameters()])`：列表里有 W 吗？",
                         "参数量：$h(q + k) + h$"),
    "add_bias": ("加性注意力的 W_q、W_k 带了偏置（bias）", "症状：注意力权重与按公式 w_vᵀ tanh(W_q q + W_k k) 算出的不同，"
                 "激活函数与掩蔽却没有错。试一试：`a = AdditiveAttention(2, 20, 8, 0.0)`，再 "
                 "`print(sum(p.numel() for p in a.parameters()), 8 * (20 + 2) + 8)`：参数个数与公式对得上吗？"
                 "用 `print([n for n, _ in a.named_parameters()])` 看多出来的是什么。", "参数量：$h(q + k) + h$"),
    "add_relu_and_bias": ("加性注意力用了 ReLU，W_q、W_k 还带了偏置", "症状：注意力权重与按公式算出的不同，原因有两处。"
                          "试一试：`a = AdditiveAttention(2, 20, 8, 0.0)`，再 "
                          "`print([n for n, _ in a.named_parameters()])`：公式里只有 W_q、W_k、w_v 三个矩阵，"
                          "多出来的是什么？再 `print(torch.relu(torch.tensor([-2.0, 0.5])))`：负的特征去哪了？"
                          "对照讲义的评分函数，看它用的是哪一个激活函数。", "加性注意力（additive attention）"),
    "dot_no_default_valid_lens": ("forward 不传 valid_lens 就出错", "症状：传了 valid_lens 时全对，只传查询、键、值时"
                                  "调用就报错。试一试：`a, q = DotProductAttention(0.0), torch.randn(1, 2, 4)`，再 "
                                  "`a(q, q, q)`：报的是什么错？题目要求不掩蔽时可以不传 valid_lens，"
                                  "讲义的 forward 是怎样让它可以省略的？", "`DotProductAttention`"),
    "ms_manual_softmax_overflow": _OVERFLOW,
    "causal_manual_softmax_overflow": _OVERFLOW,
    "dot_ignores_valid_lens": ("valid_lens 没有用上：注意力看了全部的键", "症状：不传 valid_lens 时全对，传入 valid_lens 后"
                               "结果与不传时一模一样，填充的键也分到了权重。试一试：`a, q = DotProductAttention(0.0).eval(), "
                               "torch.randn(1, 2, 4)`，再 `a(q, q, q, torch.tensor([1])); print(a.attention_weights)`：有效长度为 1 "
                               "时每个查询只该看第 0 个键，第 1 列的权重应是 0，你的是多少？", "为什么需要掩蔽？"),
    "dot_self_attention_only": ("只用查询做了自注意力，传入的键和值没有用上", "症状：查询、键、值是同一个张量（自注意力）时全对，"
                                "三者不同时输出的形状或数值不对。试一试：`a = DotProductAttention(0.0).eval()`，再 "
                                "`print(a(torch.randn(1, 2, 4), torch.randn(1, 5, 4), torch.randn(1, 5, 3)).shape)`：2 个查询、"
                                "5 个键值对、值是 3 维，输出应是 (1, 2, 3)，你的是什么？", "注意力汇聚：值的加权平均"),
    "add_sizes_swapped": ("W_q、W_k 的输入维度对调了", "症状：查询与键一样宽时全对；不一样宽时 W_q、W_k 的权重形状不对，"
                          "前向计算报形状错误。试一试：`a = AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.0)`，"
                          "再 `print(a.W_q.weight.shape, a.W_k.weight.shape)`：nn.Linear 的权重形状是（输出维度, 输入维度），"
                          "W_q 作用在 20 维的查询上，它的输入维度应是几？", "参数量：$h(q + k) + h$"),
}
# the token that tells each misconception's fix apart: its hint must not contain it (tests/test_catalog_schema.py)
FIXES = {"ms_fill_zero": "-inf", "ms_wrong_dim": "dim=-1", "ms_off_by_one": "<", "ms_2d_first_column": "逐行构造",
         "ms_repeat_not_interleave": "repeat_interleave", "add_relu": "tanh", "dot_no_scaling": "√d",
         "dot_scale_by_d": "√d", "dot_scale_by_value_dim": "queries.shape[-1]", "dot_weights_keys": "values)",
         "add_store_after_dropout": "dropout(self.attention_weights)",
         "dot_store_after_dropout": "dropout(self.attention_weights)",
         "add_dropout_ignores_eval": "training=self.training", "dot_dropout_ignores_eval": "training=self.training",
         "dot_no_dropout": "self.dropout(", "causal_sees_future": "≤", "causal_strict": "≤",
         "causal_aligned_to_start": "右下", "causal_ignores_valid_lens": "两种掩码都要用上", "causal_union": "且",
         "bil_scaled": "不缩放", "bil_w_transposed": "(query_size, key_size)", "bil_plain_tensor": "nn.Parameter",
         "add_bias": "bias=False", "add_relu_and_bias": "bias=False", "dot_no_default_valid_lens": "valid_lens=None",
         "ms_manual_softmax_overflow": "F.softmax", "causal_manual_softmax_overflow": "F.softmax",
         "dot_ignores_valid_lens": "masked_softmax(scores, valid_lens)", "dot_self_attention_only": "keys.transpose",
         "add_sizes_swapped": "Linear(query_size"}

_DOT_INIT = '''class DotProductAttention(nn.Module):
    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
'''
_ADD_INIT = '''class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
'''
_ADD_DEFAULT_BIAS = '''class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W_k = nn.Linear(key_size, num_hiddens)
        self.W_q = nn.Linear(query_size, num_hiddens)
        self.w_v = nn.Linear(num_hiddens, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
'''
_CAUSAL_DEF = '''def causal_masked_softmax(X, valid_lens=None):
    q, k = X.shape[-2:]
'''
TWINS = {
    "ms_fill_zero": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    lens = valid_lens.unsqueeze(-1) if valid_lens.dim() == 2 else valid_lens.reshape(-1, 1, 1)
    keep = torch.arange(X.size(-1), device=X.device) < lens
    return torch.softmax(torch.where(keep, X, torch.zeros_like(X)), dim=-1)'''},
    "ms_wrong_dim": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    n = X.shape[-1]
    if valid_lens.dim() == 1:
        mask = torch.arange(n, device=X.device)[None, None, :] < valid_lens[:, None, None]
    else:
        mask = torch.arange(n, device=X.device)[None, None, :] < valid_lens[:, :, None]
    scores = X.masked_fill(mask.logical_not(), torch.finfo(X.dtype).min)
    return scores.softmax(dim=1)'''},
    "ms_off_by_one": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1).expand(X.shape[0], X.shape[1])
    idx = torch.arange(X.shape[-1], device=X.device).expand(*X.shape)
    return F.softmax(X.masked_fill(idx > lens.unsqueeze(-1), torch.finfo(X.dtype).min), dim=-1)'''},
    "ms_2d_first_column": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    if valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]  # 每个样本一个长度
    mask = torch.arange(X.shape[-1], device=X.device)[None, :] < valid_lens[:, None]  # (批量大小, 键数)
    return F.softmax(X.masked_fill(~mask[:, None, :], torch.finfo(X.dtype).min), dim=-1)'''},
    "ms_repeat_not_interleave": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    B, Q, K = X.shape
    lens = valid_lens.tile((Q,)) if valid_lens.dim() == 1 else valid_lens.flatten()
    keep = torch.arange(K, device=X.device)[None, :] < lens[:, None]
    flat = X.reshape(B * Q, K).masked_fill(~keep, torch.finfo(X.dtype).min)
    return F.softmax(flat, dim=-1).reshape(B, Q, K)'''},
    "add_relu": {"additive_attention": _ADD_INIT + '''        q = self.W_q(queries)[:, :, None, :]  # (批量大小, n, 1, h)
        k = self.W_k(keys)[:, None, :, :]  # (批量大小, 1, m, h)
        scores = self.w_v(F.relu(q + k))[..., 0]
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values'''},
    "dot_no_scaling": {"dot_product_attention": _DOT_INIT + '''        scores = torch.einsum("bqd,bkd->bqk", queries, keys)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.einsum("bqk,bkv->bqv", self.dropout(self.attention_weights), values)'''},
    "dot_scale_by_d": {"dot_product_attention": _DOT_INIT + '''        scores = queries @ keys.transpose(-2, -1) / queries.size(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values'''},
    "dot_scale_by_value_dim": {"dot_product_attention": _DOT_INIT + '''        scores = queries @ keys.mT / values.shape[2] ** 0.5
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values'''},
    "dot_weights_keys": {"dot_product_attention": _DOT_INIT + '''        scores = torch.bmm(queries, keys.permute(0, 2, 1)) / math.sqrt(queries.shape[-1])
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ keys'''},
    "add_store_after_dropout": {"additive_attention": _ADD_INIT + '''        features = torch.tanh(self.W_q(queries)[:, :, None] + self.W_k(keys)[:, None])
        weights = self.dropout(masked_softmax(self.w_v(features)[..., 0], valid_lens))
        self.attention_weights = weights
        return weights @ values'''},
    "dot_store_after_dropout": {"dot_product_attention": _DOT_INIT + '''        scores = queries @ keys.mT / math.sqrt(keys.shape[-1])
        self.attention_weights = self.dropout(masked_softmax(scores, valid_lens))  # 暂退后的权重
        return self.attention_weights @ values'''},
    "add_dropout_ignores_eval": {"additive_attention": _ADD_INIT + '''        features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
        self.attention_weights = masked_softmax(self.w_v(features).squeeze(3), valid_lens)
        return torch.matmul(F.dropout(self.attention_weights, p=self.dropout.p), values)'''},
    "dot_dropout_ignores_eval": {"dot_product_attention": _DOT_INIT + '''        scores = torch.einsum("bqd,bkd->bqk", queries, keys) / queries.shape[-1] ** 0.5
        self.attention_weights = masked_softmax(scores, valid_lens)
        return nn.functional.dropout(self.attention_weights, self.dropout.p) @ values'''},
    "dot_no_dropout": {"dot_product_attention": _DOT_INIT + '''        scores = torch.einsum("bqd,bkd->bqk", queries, keys) / math.sqrt(queries.shape[-1])
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.einsum("bqk,bkv->bqv", self.attention_weights, values)'''},
    "causal_sees_future": {"causal_masked_softmax": _CAUSAL_DEF + '''    keep = torch.ones(q, k, dtype=torch.bool, device=X.device).triu(k - q)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1).expand(-1, q)
        keep = keep & (torch.arange(k, device=X.device) < lens.unsqueeze(-1))
    return F.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)'''},
    "causal_strict": {"causal_masked_softmax": _CAUSAL_DEF + '''    keep = torch.ones(q, k, dtype=torch.bool, device=X.device).tril(k - q - 1)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1).expand(-1, q)
        keep = keep & (torch.arange(k, device=X.device) < lens.unsqueeze(-1))
    return F.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)'''},
    "causal_aligned_to_start": {"causal_masked_softmax": _CAUSAL_DEF + '''    keep = torch.ones(q, k, dtype=torch.bool, device=X.device).tril()
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1).expand(-1, q)
        keep = keep & (torch.arange(k, device=X.device) < lens.unsqueeze(-1))
    return F.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)'''},
    "causal_ignores_valid_lens": {"causal_masked_softmax": _CAUSAL_DEF + '''    keep = torch.ones(q, k, dtype=torch.bool, device=X.device).tril(k - q)
    return F.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)  # valid_lens 没用上'''},
    "causal_union": {"causal_masked_softmax": _CAUSAL_DEF + '''    keep = torch.ones(q, k, dtype=torch.bool, device=X.device).tril(k - q)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1).expand(-1, q)
        keep = keep | (torch.arange(k, device=X.device) < lens.unsqueeze(-1))
    return F.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)'''},
    "bil_scaled": {"bilinear_attention": '''class BilinearAttention(nn.Module):
    def __init__(self, query_size, key_size, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W = nn.Parameter(0.1 * torch.randn(query_size, key_size))
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = torch.einsum("bqi,ij,bkj->bqk", queries, self.W, keys) / keys.shape[-1] ** 0.5
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)'''},
    # W as a map from keys to the query space: keys @ W, then a dot product with the queries
    "bil_w_transposed": {"bilinear_attention": '''class BilinearAttention(nn.Module):
    def __init__(self, query_size, key_size, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W = nn.Parameter(0.1 * torch.randn(key_size, query_size))  # 把键映射到查询的空间
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        projected = keys @ self.W  # (批量大小, 键值对数, query_size)
        scores = torch.bmm(queries, projected.transpose(1, 2))
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values'''},
    "bil_plain_tensor": {"bilinear_attention": '''class BilinearAttention(nn.Module):
    def __init__(self, query_size, key_size, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W = (0.1 * torch.randn(query_size, key_size)).requires_grad_()  # 要求梯度，以为这样就能训练
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = torch.einsum("bqi,ij,bkj->bqk", queries, self.W, keys)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)'''},
    # every layer left with PyTorch's default bias (w_v's shifts every score alike, which softmax ignores)
    "add_bias": {"additive_attention": _ADD_DEFAULT_BIAS + '''        q = self.W_q(queries)[:, :, None, :]
        k = self.W_k(keys)[:, None, :, :]
        self.attention_weights = masked_softmax(self.w_v(torch.tanh(q + k))[..., 0], valid_lens)
        return self.dropout(self.attention_weights) @ values'''},
    "add_relu_and_bias": {"additive_attention": _ADD_DEFAULT_BIAS + '''        hidden = F.relu(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
        self.attention_weights = masked_softmax(self.w_v(hidden).squeeze(3), valid_lens)
        return torch.matmul(self.dropout(self.attention_weights), values)'''},
    "dot_no_default_valid_lens": {"dot_product_attention": '''class DotProductAttention(nn.Module):
    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        scores = torch.einsum("bqd,bkd->bqk", queries, keys) / math.sqrt(keys.shape[-1])
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values'''},
    "ms_manual_softmax_overflow": {"masked_softmax": '''def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    lens = valid_lens.unsqueeze(-1) if valid_lens.dim() == 2 else valid_lens.view(-1, 1, 1)
    mask = (torch.arange(X.size(-1), device=X.device) < lens).to(X.dtype)
    weights = X.exp() * mask  # 被掩蔽的位置乘 0
    return weights / weights.sum(-1, keepdim=True)'''},
    "causal_manual_softmax_overflow": {"causal_masked_softmax": _CAUSAL_DEF + '''    keep = torch.ones(q, k, dtype=torch.bool, device=X.device).tril(k - q)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1).expand(-1, q)
        keep = keep & (torch.arange(k, device=X.device) < lens.unsqueeze(-1))
    num = torch.exp(X) * keep.to(X.dtype)
    return num / num.sum(dim=-1, keepdim=True)'''},
    "dot_ignores_valid_lens": {"dot_product_attention": _DOT_INIT + '''        scores = torch.einsum("bqd,bkd->bqk", queries, keys) / math.sqrt(queries.shape[-1])
        self.attention_weights = F.softmax(scores, dim=-1)
        return self.dropout(self.attention_weights) @ values'''},
    # self-attention: one tensor plays query, key and value
    "dot_self_attention_only": {"dot_product_attention": _DOT_INIT + '''        X = queries  # 自注意力：查询、键、值都是同一个张量
        scores = X @ X.transpose(-2, -1) / math.sqrt(X.shape[-1])
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.matmul(self.dropout(self.attention_weights), X)'''},
    # the layers built in the deck's order (the test compares their initial values), each from the other's size
    "add_sizes_swapped": {"additive_attention": '''class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super().__init__(**kwargs)
        for name, size in (("W_k", query_size), ("W_q", key_size)):
            setattr(self, name, nn.Linear(size, num_hiddens, bias=False))
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        q = self.W_q(queries)[:, :, None, :]
        k = self.W_k(keys)[:, None, :, :]
        self.attention_weights = masked_softmax(self.w_v(torch.tanh(q + k))[..., 0], valid_lens)
        return self.dropout(self.attention_weights) @ values'''},
}
