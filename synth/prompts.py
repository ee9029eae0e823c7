"""The prompts the synthesis pipelines send, in one place (so they can be read and tuned
together). Each is a function returning chat messages; the parsers that read the answers
live next to the pipelines. Wording follows the methods the report cites: MetaMath's
rephrasing (Yu et al. 2023), WizardLM's in-depth / in-breadth evolution (Xu et al. 2023),
self-instruct for code with generated unit tests."""

from __future__ import annotations

from typing import Any

Messages = list[dict[str, Any]]

SYSTEM = "You are a careful assistant that writes high-quality training data."


def _chat(user: str) -> Messages:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


# -- math ----------------------------------------------------------------------------------

def rephrase(question: str) -> Messages:
    return _chat("Rephrase the following math problem. Keep every quantity and the answer exactly "
                 "the same; change only the wording. Reply with the new problem only.\n\n"
                 f"Problem: {question}")


def evolve_depth(question: str) -> Messages:
    return _chat("Rewrite the following math problem into a harder one: add one more constraint or "
                 "one more reasoning step, keeping it solvable with a single numeric answer. Reply "
                 f"with the new problem only.\n\nProblem: {question}")


def evolve_breadth(question: str) -> Messages:
    return _chat("Write a new math problem in the same domain as the following one but about a "
                 "different topic or situation, of similar difficulty, with a single numeric answer. "
                 f"Reply with the new problem only.\n\nProblem: {question}")


def judge_problem(question: str) -> Messages:
    return _chat("Is the following math problem coherent and solvable with a single answer? Then "
                 "rate its difficulty from 1 (trivial) to 10 (olympiad). Reply exactly in the form "
                 f"'solvable: yes|no; difficulty: N'.\n\nProblem: {question}")


def solve(question: str, style: str) -> Messages:
    end = ("End with the sentence 'The answer is N.' where N is the final number."
           if style == "gsm8k" else "Put the final answer in \\boxed{}.")
    return [{"role": "user", "content": f"Solve the problem step by step. {end}\n\n{question}"}]


def judge_solution(question: str, solution: str) -> Messages:
    return _chat("Check the solution to the math problem. Reply 'correct' if its reasoning and final "
                 f"answer are right, else 'incorrect'.\n\nProblem: {question}\n\nSolution: {solution}")


# -- code ----------------------------------------------------------------------------------

def code_problems(topic: str, k: int) -> Messages:
    return _chat(f"Write {k} distinct coding interview questions about {topic}, each solvable by one "
                 "Python function. Reply with a JSON list of objects with keys 'title', "
                 "'description' and 'signature' (the Python 'def' line, e.g. "
                 "'def count_vowels(s: str) -> int:').")


def code_tests(description: str, signature: str, k: int) -> Messages:
    return _chat(f"Write {k} Python assert statements that test a correct implementation of this "
                 f"function. Use only the function; one assert per line; no other code.\n\n"
                 f"Task: {description}\nSignature: {signature}")


def code_solution(description: str, signature: str) -> Messages:
    return [{"role": "user", "content": f"{description}\n\nWrite the function `{signature}` in Python. "
                                        "Reply with one ```python code block."}]


# -- tool use ------------------------------------------------------------------------------

def tool_queries(tool: dict[str, Any], k: int) -> Messages:
    fn = tool.get("function", tool)
    return _chat(f"Write {k} different, realistic user requests that need the function "
                 f"'{fn['name']}' ({fn.get('description', '')}) to be answered, each giving every value "
                 "the function needs. Reply with a JSON list of strings.")


def no_tool_reply(question: str) -> Messages:
    return [{"role": "user", "content": question}]
