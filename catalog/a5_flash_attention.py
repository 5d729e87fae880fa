"""Catalog of assignment 5 (tiled attention and the online softmax): correct answers and realistic mistakes.

`LECTURER` is the lecturer's own d2l-zh style code (seed comment style, `torch.bmm`, the query blocks in the outer loop
and `merge_states` for the update; the backward with the key blocks outside, as FlashAttention-2's algorithm 2).
`ALSO_CORRECT["deck"]` is the code the unit-5 deck teaches, read from `notebooks/05_flash_attention.ipynb` when the
catalog is loaded; `ALSO_CORRECT["algorithm_1"]` follows FlashAttention's algorithm 1 literally (key blocks outside,
the output normalised after every block, einsum, Milakov and Gimelshein's algorithm 3 one element at a time);
`ALSO_CORRECT["exp2"]` works in base 2 as the Triton kernels do. Cells an answer does not cover keep the source
solution. Each variant lists the exact test cells that must lose points (no cascade between questions).
"""

from attncourse.grading.deck_code import deck_definitions

NOTEBOOK = "flash_attention"

# ---------------------------------------------------------------------------------------------------------------
# the lecturer's code

LECTURER = {
    "online_softmax": '''#@save
def online_softmax(blocks):
    """在线softmax：一遍求出每行的最大值和分母"""
    max_val, denom = None, None
    for X in blocks:
        # X的形状:(…，块的宽度)
        X = X.to(torch.float32)
        if max_val is None:
            max_val = torch.full(X.shape[:-1], float('-inf'), device=X.device)
            denom = torch.zeros(X.shape[:-1], device=X.device)
        new_max = torch.max(max_val, X.max(dim=-1).values)
        # 整行都是-inf时用0代替，避免-inf减-inf
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max),
                               new_max)
        denom = (denom * torch.exp(max_val - safe_max)
                 + torch.exp(X - safe_max.unsqueeze(-1)).sum(dim=-1))
        max_val = new_max
    return max_val, denom''',

    "merge_states": '''#@save
def merge_states(m1, l1, o1, m2, l2, o2):
    """合并两个部分状态"""
    m = torch.max(m1, m2)
    safe_m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    alpha1 = torch.exp(m1 - safe_m)
    alpha2 = torch.exp(m2 - safe_m)
    l = alpha1 * l1 + alpha2 * l2
    o = alpha1.unsqueeze(-1) * o1 + alpha2.unsqueeze(-1) * o2
    return m, l, o''',

    "flash_attention": '''#@save
def flash_attention(Q, K, V, block_q=64, block_k=64, causal=False,
                    valid_lens=None):
    """分块计算缩放点积注意力"""
    batch_size, num_queries, d = Q.shape
    num_keys = K.shape[1]
    offset = num_keys - num_queries
    outputs, lses = [], []
    for i in range(0, num_queries, block_q):
        # q的形状:(batch_size，块的行数，d)
        q = Q[:, i:i + block_q].to(torch.float32) / math.sqrt(d)
        n_rows = q.shape[1]
        m = torch.full((batch_size, n_rows), float('-inf'), device=Q.device)
        l = torch.zeros((batch_size, n_rows), device=Q.device)
        o = torch.zeros((batch_size, n_rows, V.shape[-1]), device=Q.device)
        row_ids = torch.arange(i, i + n_rows, device=Q.device).reshape(-1, 1)
        for j in range(0, num_keys, block_k):
            # 因果掩码下，整块都在对角线之上的块不必计算
            if causal and j > i + n_rows - 1 + offset:
                continue
            k = K[:, j:j + block_k].to(torch.float32)
            v = V[:, j:j + block_k].to(torch.float32)
            col_ids = torch.arange(j, j + k.shape[1],
                                   device=Q.device).reshape(1, -1)
            scores = torch.bmm(q, k.transpose(1, 2))
            mask = torch.ones_like(scores, dtype=torch.bool)
            if causal:
                mask = mask & (col_ids <= row_ids + offset)
            if valid_lens is not None:
                if valid_lens.dim() == 1:
                    lens = valid_lens.reshape(-1, 1, 1)
                else:
                    lens = valid_lens[:, i:i + n_rows].unsqueeze(-1)
                mask = mask & (col_ids < lens)
            scores = scores.masked_fill(~mask, float('-inf'))
            block_max = scores.max(dim=-1).values
            safe_max = torch.where(torch.isinf(block_max),
                                   torch.zeros_like(block_max), block_max)
            p = torch.exp(scores - safe_max.unsqueeze(-1))
            m, l, o = merge_states(m, l, o, block_max, p.sum(dim=-1),
                                   torch.bmm(p, v))
        l_safe = torch.where(l == 0, torch.ones_like(l), l)
        outputs.append((o / l_safe.unsqueeze(-1)).to(Q.dtype))
        lses.append(m + torch.log(l))
    return torch.cat(outputs, dim=1), torch.cat(lses, dim=1)''',

    "split_kv_decode": '''#@save
def split_kv_decode(q, K, V, num_splits, valid_lens=None):
    """Flash-Decoding：把KV缓存切成几段，分别计算后用LSE合并"""
    split_size = math.ceil(K.shape[1] / num_splits)
    outputs, lses = [], []
    for start in range(0, K.shape[1], split_size):
        lens = None
        if valid_lens is not None:
            lens = torch.clamp(valid_lens - start, min=0, max=split_size)
        o, lse = flash_attention(q, K[:, start:start + split_size],
                                 V[:, start:start + split_size],
                                 valid_lens=lens)
        outputs.append(o.to(torch.float32))
        lses.append(lse)
    # lses的形状:(段数，batch_size，查询的个数)
    lses = torch.stack(lses)
    lse = torch.logsumexp(lses, dim=0)
    safe_lse = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    weights = torch.exp(lses - safe_lse)
    output = (weights.unsqueeze(-1) * torch.stack(outputs)).sum(dim=0)
    return output.to(q.dtype), lse''',

    "flash_attention_backward": '''#@save
def flash_attention_backward(Q, K, V, O, dO, LSE, block_q=64, block_k=64,
                             causal=False):
    """FlashAttention的反向传播：由LSE重算注意力权重"""
    num_queries, num_keys, d = Q.shape[1], K.shape[1], Q.shape[-1]
    offset = num_keys - num_queries
    scale = 1 / math.sqrt(d)
    Q32, K32, V32 = Q.to(torch.float32), K.to(torch.float32), V.to(torch.float32)
    dO32 = dO.to(torch.float32)
    # D的形状:(batch_size，查询的个数)
    D = (dO32 * O.to(torch.float32)).sum(dim=-1)
    dQ = torch.zeros_like(Q32)
    dK_blocks, dV_blocks = [], []
    for j in range(0, num_keys, block_k):
        k, v = K32[:, j:j + block_k], V32[:, j:j + block_k]
        dk, dv = torch.zeros_like(k), torch.zeros_like(v)
        col_ids = torch.arange(j, j + k.shape[1], device=Q.device).reshape(1, -1)
        for i in range(0, num_queries, block_q):
            q = Q32[:, i:i + block_q]
            n_rows = q.shape[1]
            if causal and j > i + n_rows - 1 + offset:
                continue
            scores = torch.bmm(q, k.transpose(1, 2)) * scale
            if causal:
                row_ids = torch.arange(i, i + n_rows, device=Q.device).reshape(-1, 1)
                scores = scores.masked_fill(col_ids > row_ids + offset,
                                            float('-inf'))
            p = torch.exp(scores - LSE[:, i:i + n_rows].unsqueeze(-1))
            do = dO32[:, i:i + n_rows]
            dv += torch.bmm(p.transpose(1, 2), do)
            dp = torch.bmm(do, v.transpose(1, 2))
            ds = p * (dp - D[:, i:i + n_rows].unsqueeze(-1))
            dQ[:, i:i + n_rows] += torch.bmm(ds, k) * scale
            dk += torch.bmm(ds.transpose(1, 2), q) * scale
        dK_blocks.append(dk)
        dV_blocks.append(dv)
    dK = torch.cat(dK_blocks, dim=1)
    dV = torch.cat(dV_blocks, dim=1)
    return dQ.to(Q.dtype), dK.to(K.dtype), dV.to(V.dtype)''',

    "hbm_accesses": '''#@save
def hbm_accesses(N, d, M):
    """按定理2的证明数HBM的读写次数"""
    # 标准注意力：读Q、K写S，读S写P，读P、V写O
    standard = 4 * N * d + 4 * N * N
    # FlashAttention：K、V各读一次，外层循环每遍读Q、O、l、m，写O、l、m
    block_c = math.ceil(M / (4 * d))
    num_passes = math.ceil(N / block_c)
    flash = 2 * N * d + num_passes * (3 * N * d + 4 * N)
    return standard, flash''',
}

# ---------------------------------------------------------------------------------------------------------------
# the deck's code, read from the deck (a cell of the deck may define a helper the answer calls: it goes with it)

DECK = "notebooks/05_flash_attention.ipynb"
DECK_CELLS = {"online_softmax": ("online_softmax",), "merge_states": ("merge_states",),
              "flash_attention": ("block_keep", "row_block", "flash_attention"),
              "split_kv_decode": ("split_kv_decode",)}


def _deck_answers():
    """{solution grade_id: the deck's definitions of the names that answer it, in order}."""
    found = deck_definitions(__file__, DECK, {name: name for names in DECK_CELLS.values() for name in names})
    return {cell: "\n\n\n".join(found[name] for name in names if name in found)
            for cell, names in DECK_CELLS.items() if names[-1] in found}


# ---------------------------------------------------------------------------------------------------------------
# FlashAttention's algorithm 1 written literally: the key blocks outside, O, l, m kept for every row and O normalised
# after every block; Milakov and Gimelshein's algorithm 3 one element at a time; the backward with einsum

ALGORITHM_1 = {
    "online_softmax": '''def online_softmax(blocks):
    m = d = None
    for block in blocks:
        block = block.float()
        for j in range(block.shape[-1]):  # 算法 3：一次一个元素
            x = block[..., j]
            if m is None:
                m, d = torch.full_like(x, -math.inf), torch.zeros_like(x)
            m_j = torch.maximum(m, x)
            seen = m_j > -math.inf
            d = torch.where(seen, d * torch.exp(m - m_j) + torch.exp(x - m_j), d)
            m = m_j
    return m, d''',

    "merge_states": '''def merge_states(m1, l1, o1, m2, l2, o2):
    ms = torch.stack([m1, m2])
    m = ms.max(dim=0).values
    w = torch.exp(ms - m.nan_to_num(neginf=0.0))
    return m, w[0] * l1 + w[1] * l2, w[0][..., None] * o1 + w[1][..., None] * o2''',

    "flash_attention": '''def flash_attention(Q, K, V, block_q=64, block_k=64, causal=False, valid_lens=None):
    B, N_q, d = Q.shape
    N_k, dev = K.shape[1], Q.device
    O = torch.zeros(B, N_q, V.shape[-1], device=dev)  # 算法 1：O、l、m 存在 HBM 里，每块都归一化
    l = torch.zeros(B, N_q, device=dev)
    m = torch.full((B, N_q), -math.inf, device=dev)
    if valid_lens is not None and valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(B, N_q)
    for j in range(0, N_k, block_k):  # 外层：键值块
        K_j, V_j = K[:, j:j + block_k].float(), V[:, j:j + block_k].float()
        cols = torch.arange(j, j + K_j.shape[1], device=dev)
        for i in range(0, N_q, block_q):  # 内层：查询块
            rows = torch.arange(i, min(i + block_q, N_q), device=dev)
            if causal and j > int(rows[-1]) + N_k - N_q:
                continue
            r = slice(i, i + block_q)
            S = torch.einsum("bqd,bkd->bqk", Q[:, r].float(), K_j) / math.sqrt(d)
            masked = torch.zeros_like(S, dtype=torch.bool)
            if causal:
                masked |= cols[None, None, :] > rows[None, :, None] + (N_k - N_q)
            if valid_lens is not None:
                masked |= cols[None, None, :] >= valid_lens[:, r, None]
            S = S.masked_fill(masked, -math.inf)
            m_new = torch.maximum(m[:, r], S.amax(-1))
            live = m_new > -math.inf
            alpha = torch.where(live, torch.exp(m[:, r] - m_new), 0.0)
            P = torch.where(live[..., None], torch.exp(S - m_new[..., None]), 0.0)
            l_new = alpha * l[:, r] + P.sum(-1)
            O[:, r] = ((alpha * l[:, r])[..., None] * O[:, r] + torch.einsum("bqk,bkd->bqd", P, V_j)) \\
                / torch.where(l_new > 0, l_new, 1.0)[..., None]
            l[:, r], m[:, r] = l_new, m_new
    return O.to(Q.dtype), torch.where(l > 0, m + torch.log(l), -math.inf)''',

    "flash_attention_backward": '''def flash_attention_backward(Q, K, V, O, dO, LSE, block_q=64, block_k=64, causal=False):
    N_q, N_k, d = Q.shape[1], K.shape[1], Q.shape[-1]
    Qf, Kf, Vf, dOf = Q.float(), K.float(), V.float(), dO.float()
    Di = torch.einsum("bqd,bqd->bq", dOf, O.float())
    dQ, dK, dV = torch.zeros_like(Qf), torch.zeros_like(Kf), torch.zeros_like(Vf)
    for i in range(0, N_q, block_q):
        r = slice(i, i + block_q)
        rows = torch.arange(i, min(i + block_q, N_q), device=Q.device)
        for j in range(0, N_k, block_k):
            c = slice(j, j + block_k)
            cols = torch.arange(j, min(j + block_k, N_k), device=Q.device)
            if causal and j > int(rows[-1]) + N_k - N_q:
                break
            S = torch.einsum("bqd,bkd->bqk", Qf[:, r], Kf[:, c]) / math.sqrt(d)
            if causal:
                S = S.masked_fill(cols[None, None, :] > rows[None, :, None] + (N_k - N_q), -math.inf)
            P = torch.exp(S - LSE[:, r, None])
            dV[:, c] += torch.einsum("bqk,bqd->bkd", P, dOf[:, r])
            dS = P * (torch.einsum("bqd,bkd->bqk", dOf[:, r], Vf[:, c]) - Di[:, r, None]) / math.sqrt(d)
            dQ[:, r] += torch.einsum("bqk,bkd->bqd", dS, Kf[:, c])
            dK[:, c] += torch.einsum("bqk,bqd->bkd", dS, Qf[:, r])
    return dQ.to(Q.dtype), dK.to(K.dtype), dV.to(V.dtype)''',

    "hbm_accesses": '''def hbm_accesses(N, d, M):
    standard = (2 * N * d + N * N) + 2 * N * N + (N * N + 2 * N * d)
    B_c = -(-M // (4 * d))
    flash = 0
    for j in range(0, N, B_c):  # 外层循环一遍：读一块 K、V，读写全部 Q、O、l、m
        flash += 2 * min(B_c, N - j) * d + 3 * N * d + 4 * N
    return standard, flash''',
}

# ---------------------------------------------------------------------------------------------------------------
# base 2 as the Triton kernels write it: scores times log2(e), exp2 and log2, the LSE converted back at the end

EXP2 = {
    "flash_attention": '''def flash_attention(Q, K, V, block_q=64, block_k=64, causal=False, valid_lens=None):
    B, n_q, d = Q.shape
    n_k = K.shape[1]
    qk_scale = math.log2(math.e) / math.sqrt(d)  # 以 2 为底：exp(x) = exp2(x·log2 e)
    out = torch.empty(B, n_q, V.shape[-1], dtype=Q.dtype, device=Q.device)
    lse = torch.empty(B, n_q, device=Q.device)
    for start_m in range(0, n_q, block_q):
        q = Q[:, start_m:start_m + block_q].float() * qk_scale
        offs_m = torch.arange(start_m, start_m + q.shape[1], device=Q.device)
        m_i = torch.full(offs_m.shape, -float("inf"), device=Q.device).expand(B, -1).clone()
        l_i = torch.zeros_like(m_i)
        acc = torch.zeros(B, q.shape[1], V.shape[-1], device=Q.device)
        hi = min(n_k, start_m + q.shape[1] + n_k - n_q) if causal else n_k
        for start_n in range(0, hi, block_k):
            offs_n = torch.arange(start_n, min(start_n + block_k, n_k), device=Q.device)
            qk = q @ K[:, start_n:start_n + block_k].float().transpose(-1, -2)
            if causal:
                qk = torch.where(offs_m[:, None] + (n_k - n_q) >= offs_n[None, :], qk, -float("inf"))
            if valid_lens is not None:
                lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, start_m:start_m + q.shape[1], None]
                qk = torch.where(offs_n < lens, qk, -float("inf"))
            m_ij = torch.maximum(m_i, qk.amax(-1))
            m_safe = torch.where(m_ij == -float("inf"), 0.0, m_ij)
            p = torch.exp2(qk - m_safe[..., None])
            alpha = torch.exp2(m_i - m_safe)
            l_i = l_i * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ V[:, start_n:start_n + block_k].float()
            m_i = m_ij
        out[:, start_m:start_m + q.shape[1]] = (acc / torch.where(l_i == 0, 1.0, l_i)[..., None]).to(Q.dtype)
        lse[:, start_m:start_m + q.shape[1]] = (m_i + torch.log2(l_i)) / math.log2(math.e)  # 换回以 e 为底
    return out, lse''',

    "split_kv_decode": '''def split_kv_decode(q, K, V, num_splits, valid_lens=None):
    n = K.shape[1]
    size = -(-n // num_splits)
    outs, lses = [], []
    for lo in range(0, n, size):
        lens = None if valid_lens is None else torch.clamp(valid_lens - lo, 0, size)
        o, lse = flash_attention(q, K[:, lo:lo + size], V[:, lo:lo + size], valid_lens=lens)
        outs.append(o.float())
        lses.append(lse * math.log2(math.e))  # 以 2 为底的 LSE
    L2 = torch.stack(lses)
    m = L2.amax(0)
    m_safe = torch.where(m == -float("inf"), 0.0, m)
    w = torch.exp2(L2 - m_safe)
    total = w.sum(0)
    O = (w[..., None] * torch.stack(outs)).sum(0) / torch.where(total == 0, 1.0, total)[..., None]
    return O.to(q.dtype), (m_safe + torch.log2(total)) / math.log2(math.e)''',
}

ALSO_CORRECT = {"algorithm_1": ALGORITHM_1, "exp2": EXP2}
_DECK = _deck_answers()
if _DECK:
    ALSO_CORRECT["deck"] = _DECK

# ---------------------------------------------------------------------------------------------------------------
# mistakes

_OS_ALL = {"test_online_softmax", "test_online_softmax_stream"}
_FLASH_VALUES = {"test_flash_forward", "test_flash_masks", "test_flash_half"}
_FLASH_ALL = {"test_flash_forward", "test_flash_masks", "test_flash_memory", "test_flash_half", "test_flash_causal_skip"}
_BWD_ALL = {"test_flash_backward", "test_flash_backward_tiled"}
_OS_INIT = "m = torch.full(X.shape[:-1], -math.inf, device=X.device)"
_OS_BASE = "base = torch.where(m_new == -math.inf, 0.0, m_new)  # 至今整行都是 -inf：以 0 为基准"
_OS_SUM = "l = l * torch.exp(m - base) + torch.exp(X - base[..., None]).sum(dim=-1)"
_FL_SKIP = '''            if causal and j > i + q.shape[1] - 1 + offset:  # 整块都在对角线之上：跳过（之后的块也是）
                break
'''
_FL_SKIP_TEST = "if causal and j > i + q.shape[1] - 1 + offset:"
_FL_BASE = "base = torch.where(m_new == -math.inf, 0.0, m_new)  # 至今整行都被掩蔽：以 0 为基准"
_FL_L = "l = l * rescale + P.sum(dim=-1)"
_FL_O = "o = o * rescale[..., None] + torch.bmm(P, v)"
_FL_OUT = "O[:, i:i + block_q] = (o / torch.where(l == 0, 1.0, l)[..., None]).to(Q.dtype)  # 整行被掩蔽：o = 0"
_FL_LSE = "LSE[:, i:i + block_q] = m + torch.log(l)  # l = 0 时为 -inf"
_SPLIT_MERGE = '''        part = (LSE_i, torch.ones_like(LSE_i), O_i.float())  # (O_i, LSE_i) 就是 m = LSE_i、l = 1 的状态
        state = part if state is None else merge_states(*state, *part)
    m, l, o = state
    O = o / torch.where(l == 0, 1.0, l)[..., None]
    return O.to(q.dtype), m + torch.log(l)'''
_BWD_DS = "dS = P * (torch.bmm(do, v.transpose(1, 2)) - D[:, i:i + block_q, None])"

VARIANTS = [
    # ---- question 1: online_softmax
    {"id": "os_init_zero",
     "mistake": "运行中的最大值从 0 开始而不是 -inf：一行全是很负的数时 m 停在 0，l 下溢为 0",
     "edits": {"online_softmax": [(_OS_INIT, "m = torch.zeros(X.shape[:-1], device=X.device)")]},
     "caught_by": {"test_online_softmax"}},
    {"id": "os_no_rescale",
     "mistake": "最大值变大时没有把旧的 l 乘以 exp(m_旧 - m_新)：旧的和还停留在旧的基准上",
     "edits": {"online_softmax": [(_OS_SUM, "l = l + torch.exp(X - base[..., None]).sum(dim=-1)")]},
     "caught_by": _OS_ALL},
    {"id": "os_nan_first_block",
     "mistake": "没有处理整段都是 -inf 的情形：第一块全被掩蔽时算 (-inf) - (-inf) 得到 NaN",
     "edits": {"online_softmax": [(_OS_BASE, "base = m_new")]},
     "caught_by": {"test_online_softmax"}},
    {"id": "os_cat_blocks",
     "mistake": "先把各块拼成整行再求最大值和分母：结果对，但不是在线的，内存与整行一样大",
     "cells": {"online_softmax": '''def online_softmax(blocks):
    X = torch.cat(list(blocks), dim=-1).float()  # 先把整行拼起来
    m = X.amax(dim=-1)
    base = torch.where(m == -math.inf, 0.0, m)
    return m, torch.exp(X - base[..., None]).sum(dim=-1)'''},
     "caught_by": {"test_online_softmax_stream"}},
    {"id": "os_two_passes",
     "mistake": "把各块存进列表扫两遍（先求最大值，再求分母）：这是安全 softmax 的三遍做法，不是一遍",
     "cells": {"online_softmax": '''def online_softmax(blocks):
    blocks = [X.float() for X in blocks]  # 存下全部块
    m = blocks[0].amax(dim=-1)
    for X in blocks[1:]:
        m = torch.maximum(m, X.amax(dim=-1))
    base = torch.where(m == -math.inf, 0.0, m)
    l = sum(torch.exp(X - base[..., None]).sum(dim=-1) for X in blocks)
    return m, l'''},
     "caught_by": {"test_online_softmax_stream"}},
    # ---- question 2: merge_states
    {"id": "merge_swapped_weights",
     "mistake": "合并时权重用反了：第一段乘 exp(m2 - m)，第二段乘 exp(m1 - m)",
     "edits": {"merge_states": [("return m, w1 * l1 + w2 * l2, w1[..., None] * o1 + w2[..., None] * o2",
                                 "return m, w2 * l1 + w1 * l2, w2[..., None] * o1 + w1[..., None] * o2")]},
     "caught_by": {"test_merge_states"}},
    {"id": "merge_o_not_rescaled",
     "mistake": "l 换了基准，o 却直接相加",
     "edits": {"merge_states": [("w1[..., None] * o1 + w2[..., None] * o2", "o1 + o2")]},
     "caught_by": {"test_merge_states"}},
    {"id": "merge_nan_empty",
     "mistake": "没有处理两个空状态的合并：(-inf) - (-inf) 得到 NaN",
     "edits": {"merge_states": [("base = torch.where(m == -math.inf, 0.0, m)  # 两个都是空状态：以 0 为基准，免得算 (-inf) - (-inf)",
                                 "base = m")]},
     "caught_by": {"test_merge_states"}},
    # ---- question 3: flash_attention
    {"id": "flash_o_not_rescaled",
     "mistake": "最大值变大时只把 l 换到新的基准上，旧的输出 o 没有乘 exp(m_旧 - m_新)",
     "edits": {"flash_attention": [(_FL_O, "o = o + torch.bmm(P, v)")]},
     "caught_by": _FLASH_VALUES},
    {"id": "flash_max_from_zero",
     "mistake": "每行的最大值从 0 开始：一整行分数都很负（-160）时 exp 全部下溢为 0",
     "edits": {"flash_attention": [("m = torch.full((batch_size, q.shape[1]), -math.inf, device=device)",
                                    "m = torch.zeros(batch_size, q.shape[1], device=device)")]},
     "caught_by": {"test_flash_forward"}},
    {"id": "flash_lse_without_m",
     "mistake": "LSE 写成 log l，忘了加上最大值 m",
     "edits": {"flash_attention": [(_FL_LSE, "LSE[:, i:i + block_q] = torch.log(l)")]},
     "caught_by": _FLASH_VALUES},
    {"id": "flash_divide_each_block",
     "mistake": "每个块先除以本块的 l 再累加，最后不再用整行的 l 校正",
     "edits": {"flash_attention": [
         (_FL_O, "o = o * rescale[..., None] + torch.bmm(P, v) / P.sum(dim=-1).clamp(min=1e-30)[..., None]  # 每块先归一化"),
         (_FL_OUT, "O[:, i:i + block_q] = o.to(Q.dtype)")]},
     "caught_by": _FLASH_VALUES},
    {"id": "flash_tail_dropped",
     "mistake": "键块数用 n_k // block_k：块的大小不整除 n_k 时，最后一块不完整的键被丢掉",
     "edits": {"flash_attention": [("for j in range(0, n_k, block_k):", "for j in range(0, n_k // block_k * block_k, block_k):")]},
     "caught_by": {"test_flash_forward", "test_flash_masks"}},
    {"id": "flash_half_states",
     "mistake": "为了省内存，l、o 按输入的数据类型（float16/bfloat16）保存：每一步累加都被舍入",
     "edits": {"flash_attention": [(_FL_L, "l = (l * rescale + P.sum(dim=-1)).to(Q.dtype)"),
                                   (_FL_O, "o = (o * rescale[..., None] + torch.bmm(P, v)).to(Q.dtype)")]},
     "caught_by": {"test_flash_half"}},
    {"id": "flash_scale_twice",
     "mistake": "查询已经除过 sqrt(d)，分数又除了一次",
     "edits": {"flash_attention": [("S = torch.bmm(q, k.transpose(1, 2))  # (batch_size, 块的行数, 块的列数)",
                                    "S = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d)")]},
     "caught_by": _FLASH_VALUES},
    {"id": "flash_full_scores",
     "mistake": "不分块：先算出完整的分数矩阵再做 softmax（结果对，但生成了 n_q × n_k 的矩阵，也不跳过任何块）",
     "cells": {"flash_attention": '''def flash_attention(Q, K, V, block_q=64, block_k=64, causal=False, valid_lens=None):
    n_q, n_k = Q.shape[1], K.shape[1]
    S = Q.float() @ K.float().transpose(1, 2) / math.sqrt(Q.shape[-1])  # 完整的 (batch_size, n_q, n_k)
    keep = torch.ones_like(S, dtype=torch.bool)
    if causal:
        keep &= torch.ones(n_q, n_k, dtype=torch.bool, device=Q.device).tril(diagonal=n_k - n_q)
    if valid_lens is not None:
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep &= torch.arange(n_k, device=Q.device) < lens[..., None]
    S = S.masked_fill(~keep, -math.inf)
    P = torch.softmax(S, dim=-1).nan_to_num(0.0)  # 整行被掩蔽：NaN 换成 0
    return (P @ V.float()).to(Q.dtype), torch.logsumexp(S, dim=-1)'''},
     "caught_by": {"test_flash_memory", "test_flash_causal_skip"}},
    {"id": "flash_full_causal_mask",
     "mistake": "先造好完整的 n_q × n_k 因果掩码，每块再切一片：掩码本身就有 n² 个元素",
     "edits": {"flash_attention": [
         ("    offset = n_k - n_q  # 右下角对齐：查询 i 看键 0 … i + offset\n",
          "    offset = n_k - n_q  # 右下角对齐：查询 i 看键 0 … i + offset\n"
          "    full_keep = torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=offset)\n"),
         ("keep = keep & (cols[None, :] <= rows[:, None] + offset)",
          "keep = keep & full_keep[i:i + block_q, j:j + block_k]")]},
     "caught_by": {"test_flash_memory"}},
    {"id": "flash_no_skip",
     "mistake": "因果掩码下仍然计算每一个块，只靠掩码把对角线以上的权重变成 0（结果对，运算多了约一倍）",
     "edits": {"flash_attention": [(_FL_SKIP, "")]},
     "caught_by": {"test_flash_causal_skip"}},
    {"id": "flash_skip_first_row",
     "mistake": "跳过的条件用了查询块的第一行（应看最后一行）：块的行数大于 1 时，最后几行要看的键块被跳过",
     "edits": {"flash_attention": [(_FL_SKIP_TEST, "if causal and j > i + offset:")]},
     "caught_by": {"test_flash_masks"}},
    {"id": "flash_skip_one_too_few",
     "mistake": "跳过条件差一：与块末行比较时忘了减 1，正好在对角线之上的那一块仍被计算",
     "edits": {"flash_attention": [(_FL_SKIP_TEST, "if causal and j > i + q.shape[1] + offset:")]},
     "caught_by": {"test_flash_causal_skip"}},
    {"id": "flash_top_left",
     "mistake": "因果掩码按左上角对齐（查询 i 只看键 0 … i），忘了 n_q 与 n_k 不同时查询是序列最后的 n_q 个位置",
     "edits": {"flash_attention": [("offset = n_k - n_q  # 右下角对齐：查询 i 看键 0 … i + offset", "offset = 0")]},
     "caught_by": {"test_flash_masks"}},
    {"id": "flash_nan_masked_row",
     "mistake": "没有处理一行在某块之前全被掩蔽的情形：exp((-inf) - (-inf)) 得到 NaN",
     "edits": {"flash_attention": [(_FL_BASE, "base = m_new")]},
     "caught_by": {"test_flash_masks"}},
    {"id": "flash_sdpa",
     "mistake": "用题目禁止的 F.scaled_dot_product_attention（起了别名）算每个查询块，LSE 另算",
     "cells": {"flash_attention": '''from torch.nn.functional import scaled_dot_product_attention as attend


def flash_attention(Q, K, V, block_q=64, block_k=64, causal=False, valid_lens=None):
    n_q, n_k = Q.shape[1], K.shape[1]
    keep = torch.ones(Q.shape[0], n_q, n_k, dtype=torch.bool, device=Q.device)
    if causal:
        keep &= torch.ones(n_q, n_k, dtype=torch.bool, device=Q.device).tril(diagonal=n_k - n_q)
    if valid_lens is not None:
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep &= torch.arange(n_k, device=Q.device) < lens[..., None]
    O = attend(Q.float(), K.float(), V.float(), attn_mask=keep)
    O = torch.where(keep.any(dim=-1, keepdim=True), O, 0.0)
    S = (Q.float() @ K.float().transpose(1, 2) / math.sqrt(Q.shape[-1])).masked_fill(~keep, -math.inf)
    return O.to(Q.dtype), torch.logsumexp(S, dim=-1)'''},
     "caught_by": _FLASH_ALL},
    # ---- question 4: split_kv_decode
    {"id": "split_average",
     "mistake": "各段的输出直接取平均：没有按各段的 LSE 加权（各段的键数、分数都不同）",
     "edits": {"split_kv_decode": [(_SPLIT_MERGE, '''        part = (LSE_i, torch.ones_like(LSE_i), O_i.float())
        state = [part] if state is None else state + [part]
    lses = torch.stack([p[0] for p in state])
    return torch.stack([p[2] for p in state]).mean(dim=0).to(q.dtype), torch.logsumexp(lses, dim=0)''')]},
     "caught_by": {"test_split_kv_decode"}},
    {"id": "split_naive_exp",
     "mistake": "按 exp(LSE_i) / Σ exp(LSE_j) 加权，没有先减去最大的 LSE：分数很大时 exp 溢出成 inf，得到 NaN",
     "edits": {"split_kv_decode": [(_SPLIT_MERGE, '''        w = torch.exp(LSE_i)  # 权重 exp(LSE_i)
        part = (w, w[..., None] * O_i.float())
        state = part if state is None else (state[0] + part[0], state[1] + part[1])
    total, o = state
    O = o / torch.where(total == 0, 1.0, total)[..., None]
    return O.to(q.dtype), torch.log(total)''')]},
     "caught_by": {"test_split_kv_decode"}},
    {"id": "split_nan_empty",
     "mistake": "自己写的合并没有处理整段为空（LSE = -inf）的段：exp((-inf) - (-inf)) 得到 NaN",
     "edits": {"split_kv_decode": [(_SPLIT_MERGE, '''        if state is None:
            state = (LSE_i, O_i.float())
        else:
            lse = torch.logaddexp(state[0], LSE_i)
            state = (lse, torch.exp(state[0] - lse)[..., None] * state[1] + torch.exp(LSE_i - lse)[..., None] * O_i.float())
    return state[1].to(q.dtype), state[0]''')]},
     "caught_by": {"test_split_kv_decode"}},
    {"id": "split_tail_dropped",
     "mistake": "每段取 n // num_splits 个键并只切 num_splits 段：n 不是段数的倍数时，最后几个键被丢掉",
     "edits": {"split_kv_decode": [("size = math.ceil(K.shape[1] / num_splits)", "size = K.shape[1] // num_splits"),
                                   ("for start in range(0, K.shape[1], size):",
                                    "for start in range(0, num_splits * size, size):")]},
     "caught_by": {"test_split_kv_decode"}},
    # ---- question 5: flash_attention_backward
    {"id": "bwd_no_D",
     "mistake": "softmax 的反向只写了 P ∘ dP，漏了减去整行的和 D = rowsum(dO ∘ O)",
     "edits": {"flash_attention_backward": [(_BWD_DS, "dS = P * torch.bmm(do, v.transpose(1, 2))")]},
     "caught_by": _BWD_ALL},
    {"id": "bwd_missing_scale",
     "mistake": "dQ、dK 忘了乘缩放因子 1/sqrt(d)（分数对 Q、K 求导时它还在）",
     "edits": {"flash_attention_backward": [("dQ[:, i:i + block_q] += torch.bmm(dS, k) * tau",
                                             "dQ[:, i:i + block_q] += torch.bmm(dS, k)"),
                                            ("dK[:, j:j + block_k] += torch.bmm(dS.transpose(1, 2), q) * tau",
                                             "dK[:, j:j + block_k] += torch.bmm(dS.transpose(1, 2), q)")]},
     "caught_by": _BWD_ALL},
    {"id": "bwd_no_causal_mask",
     "mistake": "重算 P 时没有加因果掩码：对角线上的块里，未来位置的权重不是 0",
     "edits": {"flash_attention_backward": [("                S = S.masked_fill(cols[None, :] > rows[:, None] + offset, -math.inf)\n",
                                             "                pass  # 前向已经掩蔽过了\n")]},
     "caught_by": {"test_flash_backward_tiled"}},
    {"id": "bwd_full_P",
     "mistake": "反向传播先重算出完整的 n_q × n_k 权重 P 再求梯度（结果对，但存下了整个 P）",
     "cells": {"flash_attention_backward": '''def flash_attention_backward(Q, K, V, O, dO, LSE, block_q=64, block_k=64, causal=False):
    n_q, n_k, d = Q.shape[1], K.shape[1], Q.shape[-1]
    Qf, Kf, Vf, dOf = Q.float(), K.float(), V.float(), dO.float()
    S = Qf @ Kf.transpose(1, 2) / math.sqrt(d)  # 完整的 (batch_size, n_q, n_k)
    if causal:
        S = S.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool, device=Q.device).tril(diagonal=n_k - n_q), -math.inf)
    P = torch.exp(S - LSE[..., None])
    dP = dOf @ Vf.transpose(1, 2)
    dS = P * (dP - (dOf * O.float()).sum(dim=-1, keepdim=True)) / math.sqrt(d)
    return (dS @ Kf).to(Q.dtype), (dS.transpose(1, 2) @ Qf).to(K.dtype), (P.transpose(1, 2) @ dOf).to(V.dtype)'''},
     "caught_by": {"test_flash_backward_tiled"}},
    {"id": "bwd_tail_dropped",
     "mistake": "查询块数用 n_q // block_q：块的大小不整除 n_q 时，最后几行的梯度没有算",
     "edits": {"flash_attention_backward": [("for i in range(0, n_q, block_q):", "for i in range(0, n_q // block_q * block_q, block_q):")]},
     "caught_by": {"test_flash_backward"}},
    # ---- question 6: hbm_accesses
    {"id": "hbm_floor",
     "mistake": "B_c 用向下取整 M // 4d：M 不是 4d 的倍数时块小了一点，外层循环的遍数多算",
     "edits": {"hbm_accesses": [("B_c = -(-M // (4 * d))  # ⌈M / 4d⌉", "B_c = max(1, M // (4 * d))")]},
     "caught_by": {"test_hbm_flash"}},
    {"id": "hbm_row_passes",
     "mistake": "外层循环的遍数按查询块 T_r = ⌈N / B_r⌉ 算：算法 1 的外层循环是键值块",
     "edits": {"hbm_accesses": [("T_c = -(-N // B_c)  # 外层循环的遍数", "T_c = -(-N // min(B_c, d))")]},
     "caught_by": {"test_hbm_flash"}},
    {"id": "hbm_forget_stats",
     "mistake": "只数了 Q、O 的读写，漏了每遍都要读写的统计量 l、m",
     "edits": {"hbm_accesses": [("flash = 2 * N * d + T_c * ((2 * N * d + 2 * N) + (N * d + 2 * N))",
                                 "flash = 2 * N * d + T_c * (2 * N * d + N * d)")]},
     "caught_by": {"test_hbm_flash"}},
    {"id": "hbm_standard_no_p",
     "mistake": "标准注意力只数了写 S、读 S：漏了 softmax 写出 P、下一步再读 P",
     "edits": {"hbm_accesses": [("standard = (2 * N * d + N * N) + (N * N + N * N) + (N * N + N * d + N * d)",
                                 "standard = (2 * N * d + N * N) + N * N + (N * d + N * d)")]},
     "caught_by": {"test_hbm_standard"}},
]

# ---------------------------------------------------------------------------------------------------------------
# misconceptions (label, hint, slide title of DECK) and their twins: see catalog/a1_scoring.py.
# A hint gives the symptom and a two-line experiment that shows it, and names the slide; never the fix.

_ONLINE, _MERGE, _TILED = "在线 softmax：一遍同时求出 $m$ 和 $\\ell$", "两个部分结果的合并", "FlashAttention 的分块前向（算法 1）"
MISCONCEPTIONS = {
    "os_init_zero": ("运行中的最大值没有从 -inf 开始", "症状：有正数的行正确，一行全是很负的数时 m 不是这行的最大值，l 变成 0。试一试："
                     "`online_softmax([torch.tensor([[-5.0, -3.0]])])`，看返回的 m 是不是 -3。", "$m$ 为什么从 $-\\infty$ 开始"),
    "os_no_rescale": ("最大值变大时，旧的分母没有换到新的最大值上", "症状：只有一块时正确，后面的块出现更大的值时 l 偏大。试一试："
                      "`online_softmax([torch.tensor([[0.0]]), torch.tensor([[10.0]])])`，手算 l 应是 1 + exp(-10)，你的是多少？", _ONLINE),
    "merge_swapped_weights": ("合并时两段的权重用反了", "症状：两段的最大值相同时正确，不同时结果偏向最大值小的那一段。试一试：用 m1 = 0、m2 = 5、"
                              "l1 = l2 = 1 合并，合并后的 l 应约为 1 + exp(-5)，看看你的是多少。", _MERGE),
    "flash_o_not_rescaled": ("最大值变大时，旧的输出 o 没有换到新的最大值上", "症状：只有一个键块时正确（块比序列长），分成几块后输出不对，LSE 却是对的。"
                             "试一试：同一组输入分别用 block_k = 64 与 block_k = 2 运行，比较两次的输出。", _TILED),
    "flash_lse_without_m": ("LSE 漏了最大值 m", "症状：输出 O 正确，LSE 不对；分数整体加上一个常数 c 时，正确的 LSE 也应加上 c。"
                            "试一试：把 Q 换成 2·Q，比较两次 LSE 与 torch.logsumexp 的差。", _TILED),
    "flash_half_states": ("半精度输入时在 float16/bfloat16 中累加 l 或 o", "症状：float32 输入正确，bfloat16 输入、键很多时输出与 LSE 偏离参考值。"
                          "试一试：在循环里打印 l 的数据类型；或把 2048 个 1 在 bfloat16 中逐个相加，看结果是多少。",
                          "bfloat16 输入：为什么要在 float32 中累加"),
    "flash_top_left": ("因果掩码按左上角对齐", "症状：n_q = n_k 时正确，查询比键少时输出不对。试一试：3 个查询、5 个键、causal=True，"
                       "与手写的掩码 `torch.ones(3, 5, dtype=torch.bool).tril(diagonal=2)` 传给 SDPA 的结果比较。",
                       "右下角对齐：查询是序列最后的 $n_q$ 个位置"),
    "flash_nan_masked_row": ("一行被整块掩蔽时出现 NaN", "症状：不加掩码时正确，有效长度为 0（或一行在某个块里全被掩蔽）时输出 NaN。试一试："
                             "`flash_attention(Q, K, V, 2, 2, valid_lens=torch.tensor([0]))`，在循环里打印 exp 之前的最大值。",
                             "整行被掩蔽：输出 0，LSE 为 $-\\infty$，不是 NaN"),
    "split_average": ("各段的输出直接取平均", "症状：只有一段时正确，分成几段后输出不对，缓存长度不同时更明显。试一试：缓存 10 个键分成 2 段，"
                      "把第二段的值全改成 100，看输出是不是变成了两段各占一半。", "解码：一个查询，很长的缓存"),
    "split_naive_exp": ("按 exp(LSE_i) 直接加权，分数很大时溢出", "症状：分数小时正确，查询乘以 40 之后出现 NaN。试一试："
                        "打印 torch.exp(torch.tensor(100.0))，再想想各段的 LSE 有多大。", "`split_kv_decode`"),
    "bwd_no_D": ("softmax 的反向漏了减去整行的和", "症状：dV 正确，dQ、dK 不对。试一试：只有一个键时 softmax 的输出恒为 1，"
                 "此时 dQ 应全是 0，看看你的是不是。", "反向传播为什么重算 $\\mathbf P$"),
    "hbm_floor": ("块的大小 B_c 向下取整", "症状：M 是 4d 的倍数时正确，否则外层循环的遍数偏多。试一试：N = 1000、d = 64、M = 1000 时，"
                  "打印你算出的 B_c 与遍数，对照算法 1 第 1 行的取整符号。", "定理 2：要访问多少次 HBM"),
}

# the token that tells each misconception's fix apart, as the reference answer writes it: its hint must not contain
# it (tests/test_catalog_schema.py)
FIXES = {"os_init_zero": "-math.inf", "os_no_rescale": "l * torch.exp(m - base)", "merge_swapped_weights": "w1 * l1",
         "flash_o_not_rescaled": "o * rescale", "flash_lse_without_m": "m + torch.log(l)",
         "flash_half_states": "l * rescale + P.sum(dim=-1)", "flash_top_left": "n_k - n_q",
         "flash_nan_masked_row": "m_new == -math.inf",
         "split_average": "merge_states(", "split_naive_exp": "torch.ones_like(LSE_i)",
         "bwd_no_D": "D[:, i:i + block_q, None]", "hbm_floor": "-(-M // (4 * d))"}

_ONLINE_TWIN = '''def online_softmax(blocks):
    running_max, running_sum = None, None
    for block in blocks:
        x = block.to(torch.float32)
        if running_max is None:
            running_max = {init}
            running_sum = x.new_zeros(x.shape[:-1])
        new_max = torch.max(running_max, x.max(dim=-1).values)
        anchor = new_max.nan_to_num(neginf=0.0)
        running_sum = {update}
        running_max = new_max
    return running_max, running_sum'''
_RESCALED_SUM = "running_sum * torch.exp(running_max - anchor) + torch.exp(x - anchor[..., None]).sum(dim=-1)"
_NEG_INF = "torch.full_like(x[..., 0], -math.inf)"

_FLASH_TWIN = '''def flash_attention(Q, K, V, block_q=64, block_k=64, causal=False, valid_lens=None):
    B, n_q, d = Q.shape
    n_k = K.shape[1]
    shift = {shift}
    out, lse = [], []
    for start in range(0, n_q, block_q):
        q = Q[:, start:start + block_q].float()
        r = q.shape[1]
        qi = torch.arange(start, start + r, device=Q.device)[:, None]
        m = torch.full((B, r), -math.inf, device=Q.device)
        l = torch.zeros(B, r, device=Q.device{state_dtype})
        acc = torch.zeros(B, r, V.shape[-1], device=Q.device{state_dtype})
        stop = {stop}
        for j in range(0, stop, block_k):
            kj = torch.arange(j, min(j + block_k, n_k), device=Q.device)[None, :]
            s = torch.einsum("bqd,bkd->bqk", q, K[:, j:j + block_k].float()) / math.sqrt(d)
            if causal:
                s = s.masked_fill(kj > qi + shift, -math.inf)
            if valid_lens is not None:
                vl = valid_lens.reshape(B, 1, 1) if valid_lens.dim() == 1 else valid_lens[:, start:start + r, None]
                s = s.masked_fill(kj >= vl, -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            ref = {ref}
            p = torch.exp(s - ref[..., None])
            corr = torch.exp(m - ref)
            pv = torch.einsum("bqk,bkd->bqd", p, V[:, j:j + block_k].float())
            l = {l_update}
            acc = {acc_update}
            m = m_new
        out.append((acc / torch.where(l == 0, 1.0, l)[..., None]).to(Q.dtype))
        lse.append({lse})
    return torch.cat(out, dim=1), torch.cat(lse, dim=1)'''
_FLASH_PARTS = {"shift": "n_k - n_q", "state_dtype": "", "stop": "min(n_k, start + r + shift) if causal else n_k",
                "ref": "m_new.nan_to_num(neginf=0.0)", "l_update": "l * corr + p.sum(-1)",
                "acc_update": "acc * corr[..., None] + pv", "lse": "m + torch.log(l)"}


def _flash_twin(**parts):
    return _FLASH_TWIN.format(**{**_FLASH_PARTS, **parts})


_SPLIT_TWIN = '''def split_kv_decode(q, K, V, num_splits, valid_lens=None):
    n = K.shape[1]
    size = -(-n // num_splits)
    outs, lses = [], []
    for lo in range(0, n, size):
        lens = None if valid_lens is None else torch.clamp(valid_lens - lo, 0, size)
        o, lse = flash_attention(q, K[:, lo:lo + size], V[:, lo:lo + size], valid_lens=lens)
        outs.append(o.float())
        lses.append(lse)
    O, L = torch.stack(outs), torch.stack(lses)
{combine}'''

TWINS = {
    "os_init_zero": {"online_softmax": _ONLINE_TWIN.format(init="x.new_zeros(x.shape[:-1])  # 从 0 开始",
                                                           update=_RESCALED_SUM)},
    "os_no_rescale": {"online_softmax": _ONLINE_TWIN.format(
        init=_NEG_INF, update="running_sum + torch.exp(x - anchor[..., None]).sum(dim=-1)")},
    "merge_swapped_weights": {"merge_states": '''def merge_states(m1, l1, o1, m2, l2, o2):
    m = torch.max(m1, m2)
    ref = m.nan_to_num(neginf=0.0)
    a, b = torch.exp(m1 - ref), torch.exp(m2 - ref)
    return m, b * l1 + a * l2, b.unsqueeze(-1) * o1 + a.unsqueeze(-1) * o2'''},
    "flash_o_not_rescaled": {"flash_attention": _flash_twin(acc_update="acc + pv")},
    "flash_lse_without_m": {"flash_attention": _flash_twin(lse="torch.log(l)")},
    "flash_half_states": {"flash_attention": _flash_twin(
        state_dtype=", dtype=Q.dtype", l_update="(l * corr + p.sum(-1)).to(Q.dtype)",
        acc_update="(acc * corr[..., None] + pv).to(Q.dtype)")},
    "flash_top_left": {"flash_attention": _flash_twin(shift="0  # 查询 i 看键 0 … i")},
    "flash_nan_masked_row": {"flash_attention": _flash_twin(ref="m_new")},
    "split_average": {"split_kv_decode": _SPLIT_TWIN.format(
        combine="    return O.mean(dim=0).to(q.dtype), torch.logsumexp(L, dim=0)")},
    "split_naive_exp": {"split_kv_decode": _SPLIT_TWIN.format(combine='''    w = torch.exp(L)  # 各段的权重
    total = w.sum(dim=0)
    out = (w[..., None] * O).sum(dim=0) / torch.where(total == 0, 1.0, total)[..., None]
    return out.to(q.dtype), torch.log(total)''')},
    "bwd_no_D": {"flash_attention_backward": LECTURER["flash_attention_backward"].replace(
        "ds = p * (dp - D[:, i:i + n_rows].unsqueeze(-1))", "ds = p * dp")},
    "hbm_floor": {"hbm_accesses": LECTURER["hbm_accesses"].replace(
        "block_c = math.ceil(M / (4 * d))", "block_c = max(1, math.floor(M / (4 * d)))")},
}
