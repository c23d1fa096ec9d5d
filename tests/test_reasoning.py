"""Reasoning models: the final answer is what gets scored, the thinking is kept apart, a cut-off thought is empty."""

from __future__ import annotations

import pytest

from h2htalk.llm.reasoning import final_answer, split_reasoning

R1 = {"name": "r1", "reasoning": {"parser": "deepseek_r1", "max_new_tokens": 1024}}


@pytest.mark.parametrize(
    ("text", "apart", "expected"),
    [
        ("<think>先想想她为什么难过</think>\n\n抱抱你。", None, ("抱抱你。", "先想想她为什么难过", False)),
        # R1-distilled chat templates open <think> themselves: the content starts inside it
        ("先想想\n</think>\n\n抱抱你。", None, ("抱抱你。", "先想想", False)),
        ("<think>想啊想，还没想完", None, ("", "想啊想，还没想完", True)),
        ("<think>a</think>抱抱你。<think>b</think>别怕。", None, ("别怕。", "a</think>抱抱你。<think>b", False)),
        ("没有思考的回答。", None, ("没有思考的回答。", None, False)),
        ("\n\n抱抱你。", "先想想", ("抱抱你。", "先想想", False)),  # vLLM's parser / DeepSeek's API
        ("", "想啊想", ("", "想啊想", True)),
    ],
)
def test_split_reasoning(text, apart, expected):
    assert split_reasoning(text, apart) == expected


def test_final_answer_flags_an_answer_cut_off_while_thinking():
    cut = final_answer({"response": "<think>想啊想", "finish_reason": "length"}, R1)
    assert cut["response"] == "" and cut["reasoning"] == "想啊想" and cut["truncated_in_reasoning"]
    assert not cut["no_final_answer"]
    # vLLM's parser puts an answer that never closed its thinking into reasoning_content, content empty
    stopped = final_answer({"response": "", "reasoning": "想完了但没说", "finish_reason": "stop"}, R1)
    assert stopped["response"] == "" and stopped["no_final_answer"] and not stopped["truncated_in_reasoning"]
    done = final_answer({"response": "<think>想</think>好的。", "finish_reason": "stop"}, R1)
    assert done["response"] == "好的。" and not done["truncated_in_reasoning"]
    plain = {"response": "<think>不是推理模型</think>好的。", "finish_reason": "stop"}
    assert final_answer(plain, {"name": "m"}) == plain  # only registry reasoning models are split
