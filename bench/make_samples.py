"""Writes the demo datasets in annotations/sample_data/ (run: python -m bench.make_samples).

Every prompt, reference and answer below was written for this project. Ratings are synthetic: each answer has a
hand-assigned quality per aspect, and three raters (a lenient, a neutral and a strict one) score it with seeded
noise, so agreement and judge-vs-human statistics on the sample are meaningful but not perfect. A few scores are
"NA" (aspect not applicable) or 0 (the rater skipped it), as in llm-human-eval-jp.
"""

import json
import random
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).resolve().parent.parent / "annotations" / "sample_data"
JP_ASPECTS = ["detailedness", "factuality", "fluency", "relevance", "overall"]
JP_RATERS = ["synth-rater-1", "synth-rater-2", "synth-rater-3"]
RATER_BIAS = [0.4, 0.0, -0.6]
SYSTEMS = ["sys_a", "sys_b", "sys_c", "sys_d"]

# Quality profile per system style, in aspect order (detailedness, factuality, fluency, relevance, overall).
# A turn may override one system's profile when its answer is unusually good or bad.
PROFILES = {
    "sys_a": (4.7, 4.6, 4.8, 4.8, 4.7),  # thorough, structured
    "sys_b": (3.0, 4.4, 4.5, 4.5, 3.8),  # brief but correct
    "sys_c": (4.0, 2.3, 4.0, 3.8, 2.8),  # fluent, with a factual slip
    "sys_d": (1.6, 3.2, 2.6, 2.2, 1.8),  # terse or off target
}

LLM_JP_PROMPTS: list[dict[str, Any]] = [
    {
        "id": "demo-en###1",
        "turns": [
            {
                "prompt": "What causes the seasons on Earth?",
                "reference": "The tilt of Earth's axis (about 23.4 degrees) changes how directly sunlight strikes each "
                "hemisphere over the year; distance from the Sun plays almost no role.",
                "answers": {
                    "sys_a": "Seasons come from the **tilt of Earth's rotation axis**, about 23.4°.\n\n"
                    "- In June the Northern Hemisphere leans toward the Sun: sunlight arrives more steeply and days "
                    "are longer, so it is summer there.\n- Six months later the same hemisphere leans away, the "
                    "light is spread over a larger area and days are short: winter.\n\nA common myth is that "
                    "seasons follow the distance to the Sun. In fact Earth is closest to the Sun in early January, "
                    "during the northern winter.",
                    "sys_b": "The 23.4° tilt of Earth's axis: each hemisphere gets more direct sunlight for half "
                    "of the year.",
                    "sys_c": "Seasons happen because Earth's orbit is strongly elliptical, so in summer we are much "
                    "closer to the Sun and in winter much farther away. The tilt of the axis adds a small effect "
                    "on top of this, which is why the seasons are reversed in the Southern Hemisphere.",
                    "sys_d": "Because of the weather.",
                },
            }
        ],
    },
    {
        "id": "demo-en###2",
        "turns": [
            {
                "prompt": "Write a Python function that returns the n-th Fibonacci number.",
                "reference": "An iterative loop keeping the last two values runs in O(n) time and O(1) memory; "
                "fib(0) = 0, fib(1) = 1.",
                "answers": {
                    "sys_a": "An iterative version avoids the exponential cost of naive recursion:\n\n```python\n"
                    'def fibonacci(n: int) -> int:\n    if n < 0:\n        raise ValueError("n must be '
                    'non-negative")\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    '
                    "return a\n```\n\n`fibonacci(0)` is 0, `fibonacci(10)` is 55. It runs in O(n) time and "
                    "constant memory.",
                    "sys_b": "```python\ndef fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, "
                    "a + b\n    return a\n```",
                    "sys_c": "```python\ndef fib(n):\n    if n <= 1:\n        return 1\n    return fib(n - 1) + "
                    "fib(n - 2)\n```\nThis is the fastest way to compute Fibonacci numbers.",
                    "sys_d": "Use recursion.",
                },
            },
            {
                "prompt": "Now make it work for very large n, like 10**6.",
                "reference": "Keep the iterative loop (Python integers are unbounded) or use fast doubling for "
                "O(log n) steps; avoid recursion, which hits the recursion limit.",
                "answers": {
                    "sys_a": "The loop above already handles big numbers, because Python integers have no fixed "
                    "size, but it needs a million additions of ever larger integers. **Fast doubling** needs only "
                    "about log2(n) steps:\n\n```python\ndef fibonacci(n: int) -> int:\n    def pair(k: int) -> "
                    "tuple[int, int]:\n        if k == 0:\n            return 0, 1\n        a, b = pair(k // 2)\n"
                    "        c = a * (2 * b - a)\n        d = a * a + b * b\n        return (d, c + d) if k % 2 "
                    "else (c, d)\n    return pair(n)[0]\n```\n\nThe recursion depth is only about 20 for "
                    "n = 10**6.",
                    "sys_b": "The iterative loop works as is: Python ints are arbitrary precision. For speed use "
                    "the fast doubling identities F(2k) = F(k)(2F(k+1) - F(k)) and F(2k+1) = F(k)^2 + F(k+1)^2.",
                    "sys_c": "Add `@functools.lru_cache` to the recursive version and call `fib(10**6)`; caching "
                    "makes it instant.",
                    "sys_d": "Use numpy arrays with int64.",
                },
                "overrides": {"sys_c": (3.0, 1.8, 4.0, 3.5, 2.0)},
            },
        ],
    },
    {
        "id": "demo-en###3",
        "turns": [
            {
                "prompt": "Give me three tips for a job interview.",
                "reference": "Research the organisation, prepare concrete examples of past work, and ask "
                "thoughtful questions at the end.",
                "answers": {
                    "sys_a": "1. **Research the organisation**: know its products, recent news and the team "
                    "you would join.\n2. **Prepare stories**: pick three or four situations from past work and "
                    "tell them as situation, action, result.\n3. **Ask real questions**: what does success look "
                    "like after six months? Interviewers remember candidates who are curious.",
                    "sys_b": "Research the company, practise answers with concrete examples, and prepare a few "
                    "questions of your own.",
                    "sys_c": "Arrive at least an hour early so that you can show commitment, talk mainly about "
                    "your salary expectations, and memorise answers word for word so you never hesitate.",
                    "sys_d": "be confident!!",
                },
                "na": {"factuality": [1]},
            }
        ],
    },
    {
        "id": "demo-en###4",
        "turns": [
            {
                "prompt": "Summarise the plot of Romeo and Juliet in two sentences.",
                "reference": "Two young lovers from feuding families in Verona marry in secret. A chain of "
                "misunderstandings leads both to take their own lives, which finally reconciles the families.",
                "answers": {
                    "sys_a": "In Verona, Romeo and Juliet, children of the feuding Montague and Capulet families, "
                    "fall in love and marry in secret. After Romeo is banished, a plan to reunite them fails, both "
                    "die, and their deaths finally end the feud.",
                    "sys_b": "Two lovers from rival families marry secretly; a failed plan leads to both of their "
                    "deaths, which reconciles the families.",
                    "sys_c": "Romeo and Juliet meet in Venice and elope to Mantua, where they live happily until "
                    "Juliet's father forgives them. It is one of Shakespeare's comedies.",
                    "sys_d": "It is a play by Shakespeare about love. It is very famous and has been adapted "
                    "into many films. Many people study it at school. The language is old.",
                },
                "overrides": {"sys_c": (3.0, 1.0, 4.2, 3.0, 1.5)},
            }
        ],
    },
    {
        "id": "demo-en###5",
        "turns": [
            {
                "prompt": "What is the difference between a list and a tuple in Python?",
                "reference": "Lists are mutable, tuples are immutable; tuples can be dictionary keys when their "
                "items are hashable, and they signal fixed-size records.",
                "answers": {
                    "sys_a": "| | list | tuple |\n|---|---|---|\n| mutable | yes | no |\n| syntax | `[1, 2]` | "
                    "`(1, 2)` |\n| hashable | no | yes, if its items are |\n\nUse a list for a collection that "
                    "grows or changes, and a tuple for a fixed record such as `(x, y)` or a dictionary key.",
                    "sys_b": "A list can be changed after creation; a tuple cannot. Tuples of hashable items can "
                    "be used as dict keys.",
                    "sys_c": "Lists and tuples are identical except that tuples are faster and use round "
                    "brackets. Both can be modified with append().",
                    "sys_d": "tuple = ()",
                },
            }
        ],
    },
    {
        "id": "demo-en###6",
        "turns": [
            {
                "prompt": "Suggest a name for a bakery that specialises in sourdough.",
                "reference": "Any short, memorable name that evokes sourdough, e.g. 'Wild Yeast' or 'The Starter'.",
                "answers": {
                    "sys_a": "A few ideas:\n\n- **The Patient Loaf**: sourdough takes time, and the name says so.\n"
                    "- **Wild Rise**: a nod to wild yeast.\n- **Starter & Crumb**\n\nI would pick *Wild Rise*: "
                    "short, easy to say and easy to find online.",
                    "sys_b": '"Wild Rise Bakery".',
                    "sys_c": 'How about "Croissant Corner"? Everybody loves croissants, and they are the '
                    "classic sourdough pastry.",
                    "sys_d": "Bakery 1",
                },
                "na": {"factuality": [0, 1, 2]},
            }
        ],
    },
    {
        "id": "demo-en###7",
        "turns": [
            {
                "prompt": "My sourdough never rises. What could be wrong?",
                "reference": "Most often a weak or inactive starter, a kitchen that is too cold, too little "
                "fermentation time, or too little gluten development.",
                "answers": {
                    "sys_a": "Check these, in this order:\n\n1. **Starter strength**: it should double within 4-8 "
                    "hours after feeding. If not, feed it daily for a few days.\n2. **Temperature**: below about "
                    "22 °C fermentation slows a lot; give the dough more time or a warmer spot.\n3. **Bulk "
                    "fermentation**: the dough should grow by roughly half and feel airy before shaping.\n4. "
                    "**Gluten**: a few sets of stretch-and-folds help the dough hold gas.",
                    "sys_b": "Probably a weak starter or a cold kitchen. Make sure the starter doubles after "
                    "feeding and let the dough ferment longer.",
                    "sys_c": "You are probably using too much starter. Sourdough needs only a pinch of starter, "
                    "and adding baking soda will make it rise properly.",
                    "sys_d": "Try buying yeast.",
                },
            },
            {
                "prompt": "The starter does double. Anything else?",
                "reference": "Then look at fermentation time and temperature, shaping tension, flour protein and "
                "hydration, and whether the loaf is over-proofed.",
                "answers": {
                    "sys_a": "Then the yeast is fine, and the usual suspects are the dough and the timing:\n\n- "
                    "**Over-proofing**: if the loaf spreads and deflates when scored, shorten the final proof.\n"
                    "- **Shaping**: a tight outer skin helps it rise upward instead of outward.\n- **Flour**: "
                    "low-protein flour gives a slack dough; try bread flour.\n- **Hydration**: very wet doughs are "
                    "harder to handle; drop a few percent of water.",
                    "sys_b": "Look at proofing time (over-proofed dough collapses), shaping tension and flour "
                    "strength.",
                    "sys_c": "If the starter doubles, the problem must be the oven. Bake at 150 °C for two hours "
                    "so the bread has time to rise in the oven.",
                    "sys_d": "Maybe the flour.",
                },
            },
        ],
    },
    {
        "id": "demo-en###8",
        "turns": [
            {
                "prompt": "Explain what an API is to a ten-year-old.",
                "reference": "An API is like a menu in a restaurant: it lists what you can ask a program for and "
                "how, without needing to know how the kitchen works.",
                "answers": {
                    "sys_a": "Imagine a restaurant. You don't walk into the kitchen to cook: you read the menu "
                    "and tell the waiter what you want, and the food comes back. An **API** is the menu and the "
                    "waiter for computer programs. One app asks another app for something, like today's weather, "
                    "in a way both agree on, and gets the answer back.",
                    "sys_b": "It's a set of rules that lets one program ask another program for things, like "
                    "ordering from a menu.",
                    "sys_c": "API stands for Advanced Programming Internet. It is the part of the internet that "
                    "stores all apps, like a giant library.",
                    "sys_d": "Application Programming Interface. It is an interface for programming "
                    "applications by means of a defined contract of endpoints and payload schemas.",
                },
                "overrides": {"sys_d": (2.0, 4.5, 3.5, 2.0, 2.0)},
            }
        ],
    },
    {
        "id": "demo-en###9",
        "turns": [
            {
                "prompt": "How many bones does an adult human have?",
                "reference": "206.",
                "answers": {
                    "sys_a": "An adult human skeleton usually has **206 bones**. Babies are born with around "
                    "270 to 300, many of which fuse during growth, for example in the skull and the sacrum.",
                    "sys_b": "206.",
                    "sys_c": "An adult has 212 bones, a number that stays the same from birth.",
                    "sys_d": "Around 200, I think.",
                },
                "overrides": {"sys_b": (3.5, 5.0, 4.8, 5.0, 4.6), "sys_c": (2.5, 1.0, 4.5, 4.0, 1.5)},
            }
        ],
    },
    {
        "id": "demo-en###10",
        "turns": [
            {
                "prompt": "Write a haiku about autumn rain.",
                "reference": "A three-line poem of roughly 5-7-5 syllables with an autumn image.",
                "answers": {
                    "sys_a": "Cold rain on the eaves—\nred maple leaves drift and cling\nto the empty path",
                    "sys_b": "Autumn rain falling\nthe garden quietly waits\nfor the first cold night",
                    "sys_c": "Rain, rain, go away,\ncome again another day,\nlittle Johnny wants to play.",
                    "sys_d": "Autumn rain is wet.",
                },
                "na": {"factuality": [0, 1, 2]},
                "overrides": {"sys_b": (4.0, 4.5, 4.5, 4.8, 4.3), "sys_c": (2.5, 3.5, 4.0, 1.5, 1.5)},
            }
        ],
    },
    {
        "id": "demo-en###11",
        "turns": [
            {
                "prompt": "Is it safe to store cooked rice at room temperature overnight?",
                "reference": "No. Bacillus cereus spores survive cooking and can produce toxins at room "
                "temperature; cool rice quickly and refrigerate within about an hour.",
                "answers": {
                    "sys_a": "**No.** Cooked rice can carry spores of *Bacillus cereus*, which survive cooking. "
                    "At room temperature they germinate and produce toxins that reheating does not destroy. "
                    "Cool leftover rice quickly, refrigerate it within about an hour, and eat it within a day.",
                    "sys_b": "No: bacteria can grow and make toxins. Refrigerate it soon after cooking.",
                    "sys_c": "Yes, as long as you reheat it thoroughly the next day, because heat kills any "
                    "bacteria and their toxins.",
                    "sys_d": "Depends.",
                },
                "overrides": {"sys_c": (3.0, 1.0, 4.5, 4.0, 1.2)},
            }
        ],
    },
    {
        "id": "demo-en###12",
        "turns": [
            {
                "prompt": "Translate into French: 'The library opens at nine.'",
                "reference": "La bibliothèque ouvre à neuf heures.",
                "answers": {
                    "sys_a": "« La bibliothèque ouvre à neuf heures. »",
                    "sys_b": "La bibliothèque ouvre à 9 h.",
                    "sys_c": "La librairie ouvre à neuf heures.",
                    "sys_d": "Die Bibliothek öffnet um neun.",
                },
                "overrides": {
                    "sys_a": (4.0, 5.0, 5.0, 5.0, 4.9),
                    "sys_b": (4.0, 5.0, 4.8, 5.0, 4.7),
                    "sys_c": (3.5, 2.5, 4.5, 4.5, 2.8),
                    "sys_d": (2.0, 3.0, 3.0, 1.0, 1.0),
                },
            }
        ],
    },
    {
        "id": "demo-ja###1",
        "turns": [
            {
                "prompt": "仕事へのやる気を取り戻すための工夫を3つ教えてください。",
                "reference": "小さな目標を設定して達成感を得る、"
                "仕事の目的や意義を見直す、休息と生活リズムを整える、など。",
                "answers": {
                    "sys_a": "やる気を取り戻すための工夫を3つご紹介します。\n\n1. **小さな目標を立てる**: "
                    "1日の終わりに「できた」と言える作業を一つ決めると、達成感が積み重なります。\n2. "
                    "**仕事の意義を見直す**: 自分の仕事が誰の役に立っているかを書き出してみましょう。\n3. "
                    "**休息を優先する**: 睡眠不足はやる気の低下に直結します。まずは生活リズムを整えることが大切です。",
                    "sys_b": "小さな目標を立てる、仕事の目的を思い出す、しっかり休む、の3つがおすすめです。",
                    "sys_c": "やる気が出ないときは、まず転職を考えるのが一番です。人間のやる気は脳内のドーパミンが毎朝"
                    "リセットされることで決まるため、朝に仕事をしないことも効果的です。",
                    "sys_d": "がんばりましょう。",
                },
            }
        ],
    },
    {
        "id": "demo-ja###2",
        "turns": [
            {
                "prompt": "日本で一番高い山と、その標高を教えてください。",
                "reference": "富士山で、標高は3776メートルです。",
                "answers": {
                    "sys_a": "日本で一番高い山は**富士山**で、標高は3,776メートルです。静岡県と山梨県にまたがる"
                    "成層火山で、2013年に世界文化遺産に登録されました。",
                    "sys_b": "富士山です。標高は3776メートルです。",
                    "sys_c": "日本で一番高い山は北岳で、標高は3,193メートルです。富士山は2番目に高い山です。",
                    "sys_d": "Mount Fuji.",
                },
                "overrides": {
                    "sys_b": (3.5, 5.0, 4.8, 5.0, 4.6),
                    "sys_c": (3.0, 1.0, 4.5, 4.0, 1.3),
                    "sys_d": (1.5, 4.5, 2.0, 3.5, 2.2),
                },
            }
        ],
    },
    {
        "id": "demo-ja###3",
        "turns": [
            {
                "prompt": "「情けは人のためならず」の意味を説明してください。",
                "reference": "人に情けをかけるのは、その人のためだけでなく、"
                "巡り巡って自分に良い報いが返ってくるという意味。",
                "answers": {
                    "sys_a": "「情けは人のためならず」は、**人に親切にすると、巡り巡って自分にも良い報いが返ってくる**"
                    "という意味のことわざです。\n\nよく「情けをかけるとその人のためにならない」と誤解されますが、"
                    "これは本来の意味とは異なります。",
                    "sys_b": "人への親切は、いずれ自分に返ってくるという意味です。",
                    "sys_c": "人に情けをかけて甘やかすと、その人の成長のためにならないので、厳しく接するべきだ"
                    "という意味です。",
                    "sys_d": "ことわざです。",
                },
                "overrides": {"sys_c": (3.5, 1.0, 4.5, 4.0, 1.4)},
            }
        ],
    },
    {
        "id": "demo-ja###4",
        "turns": [
            {
                "prompt": "健康的な朝ごはんの献立を一つ提案してください。",
                "reference": "主食・主菜・副菜がそろった献立。例: ご飯、焼き魚、味噌汁、納豆、果物。",
                "answers": {
                    "sys_a": "和食の例をご提案します。\n\n- ご飯（雑穀米にすると食物繊維が増えます）\n- 焼き鮭\n- "
                    "豆腐とわかめの味噌汁\n- 納豆\n- みかん\n\n主食・主菜・副菜がそろい、たんぱく質とビタミンを"
                    "バランスよくとれます。",
                    "sys_b": "ご飯、焼き魚、味噌汁、果物の組み合わせがバランスが良いです。",
                    "sys_c": "菓子パンとエナジードリンクがおすすめです。糖分とカフェインで朝から頭がすっきりし、"
                    "栄養バランスも完璧です。",
                    "sys_d": "パン",
                },
                "overrides": {"sys_c": (2.5, 1.5, 4.0, 3.5, 1.2)},
            }
        ],
    },
    {
        "id": "demo-ja###5",
        "turns": [
            {
                "prompt": "Pythonでリストから重複を取り除く方法を教えてください。順序は保ちたいです。",
                "reference": "list(dict.fromkeys(items)) で、最初に現れた順序を保ったまま重複を除ける。",
                "answers": {
                    "sys_a": "順序を保つなら `dict.fromkeys` を使うのが簡単です。\n\n```python\nitems = [3, 1, 3, "
                    "2, 1]\nunique = list(dict.fromkeys(items))\nprint(unique)  # [3, 1, 2]\n```\n\n"
                    "`set(items)` でも重複は消えますが、順序は保証されないので注意してください。",
                    "sys_b": "`list(dict.fromkeys(items))` で順序を保ったまま重複を除けます。",
                    "sys_c": "`list(set(items))` を使えば、元の順序を保ったまま重複を取り除けます。",
                    "sys_d": "for文で頑張ってください。",
                },
                "overrides": {"sys_c": (2.5, 1.5, 4.5, 4.0, 2.0)},
            },
            {
                "prompt": "要素が辞書の場合はどうすればいいですか？",
                "reference": "辞書はハッシュ可能でないため、キーの組をタプルなどに変換して既出チェックを行う。",
                "answers": {
                    "sys_a": "辞書はハッシュ化できないので、そのままでは `dict.fromkeys` に使えません。"
                    "内容をタプルに変換して、既に見たかどうかを記録します。\n\n```python\nseen = set()\nunique = "
                    "[]\nfor d in records:\n    key = tuple(sorted(d.items()))\n    if key not in seen:\n        "
                    "seen.add(key)\n        unique.append(d)\n```\n\n値にリストなどが含まれる場合は、"
                    "`json.dumps(d, sort_keys=True)` をキーにする方法もあります。",
                    "sys_b": "辞書はハッシュ化できないので、`tuple(sorted(d.items()))` をキーにして既出チェックを"
                    "しながらループで取り除きます。",
                    "sys_c": "辞書の場合も `list(dict.fromkeys(records))` でそのまま動きます。",
                    "sys_d": "辞書は重複しません。",
                },
                "overrides": {"sys_c": (2.0, 1.0, 4.5, 4.0, 1.3)},
            },
        ],
    },
    {
        "id": "demo-ja###6",
        "turns": [
            {
                "prompt": "京都で半日観光するおすすめのルートを教えてください。",
                "reference": "例: 清水寺から二年坂・三年坂を歩き、八坂神社を経て祇園を散策する東山ルート。",
                "answers": {
                    "sys_a": "東山エリアを歩くルートがおすすめです。\n\n1. **清水寺**（朝早めが空いています）\n2. "
                    "**二年坂・三年坂**で町並みと甘味を楽しむ\n3. **八坂神社**\n4. **祇園・花見小路**を散策\n\n"
                    "徒歩中心で約4時間です。歩きやすい靴でどうぞ。",
                    "sys_b": "清水寺から二年坂・三年坂を通って八坂神社、祇園へ歩くルートが定番です。",
                    "sys_c": "金閣寺から嵐山、伏見稲荷、清水寺、銀閣寺をすべて徒歩で回るのがおすすめです。半日で"
                    "十分に回れます。",
                    "sys_d": "京都はいいところです。",
                },
            }
        ],
    },
    {
        "id": "demo-ja###7",
        "turns": [
            {
                "prompt": "次の文を丁寧な敬語に直してください：「明日の会議、出られないから資料送っといて」",
                "reference": "「明日の会議に出席できないため、資料をお送りいただけますでしょうか。」",
                "answers": {
                    "sys_a": "「申し訳ございませんが、明日の会議には出席できかねます。お手数ですが、資料をお送り"
                    "いただけますでしょうか。」",
                    "sys_b": "「明日の会議に出席できないので、資料を送っていただけますか。」",
                    "sys_c": "「明日の会議、出席されられないので、資料を送らさせていただきます。」",
                    "sys_d": "明日は無理です。",
                },
                "overrides": {"sys_c": (3.0, 3.0, 1.5, 3.0, 1.5)},
            }
        ],
    },
    {
        "id": "demo-ja###8",
        "turns": [
            {
                "prompt": "明治維新が始まったのは何年ですか？",
                "reference": "一般に1868年とされる。",
                "answers": {
                    "sys_a": "明治維新は一般に**1868年**に始まったとされます。この年に元号が明治に改められ、"
                    "五箇条の御誓文が出されました。前年の1867年の大政奉還を起点とする見方もあります。",
                    "sys_b": "1868年です。",
                    "sys_c": "明治維新は1886年に始まり、同じ年に大日本帝国憲法が発布されました。",
                    "sys_d": "江戸時代の後です。",
                },
                "overrides": {"sys_b": (3.5, 5.0, 4.8, 5.0, 4.5), "sys_c": (3.0, 1.0, 4.5, 4.0, 1.2)},
            }
        ],
    },
    {
        "id": "demo-ja###9",
        "turns": [
            {
                "prompt": "リモートワークの長所と短所をまとめてください。",
                "reference": "長所: 通勤時間の削減、柔軟な働き方。"
                "短所: コミュニケーション不足、仕事と私生活の境界が曖昧。",
                "answers": {
                    "sys_a": "| | 内容 |\n|---|---|\n| 長所 | 通勤時間がなくなる、集中しやすい環境を作れる、"
                    "住む場所の自由度が上がる |\n| 短所 | 雑談や相談が減る、運動不足になりやすい、"
                    "仕事と私生活の区切りがつきにくい |\n\n短所は、定例の雑談時間や始業・終業の区切りを"
                    "決めることである程度補えます。",
                    "sys_b": "長所は通勤がなく柔軟に働けること、短所はコミュニケーションが減り、オンとオフの切り替えが"
                    "難しいことです。",
                    "sys_c": "リモートワークの長所は、法律で残業が禁止されることです。短所は特にありません。",
                    "sys_d": "家で働くことです。",
                },
            },
            {
                "prompt": "短所への対策を一つ具体的に挙げてください。",
                "reference": "例: 毎日決まった時間に短いオンライン朝会を行い、相談しやすい場を作る。",
                "answers": {
                    "sys_a": "**毎朝15分のオンライン朝会**を設けることをおすすめします。各自が今日の予定と困りごとを"
                    "一言ずつ話すだけで、相談のきっかけが生まれ、孤立感も減ります。",
                    "sys_b": "毎朝短いオンライン朝会を開いて、相談しやすい場を作ることです。",
                    "sys_c": "カメラを常時オンにして、上司が一日中監視できるようにすると、コミュニケーション不足は"
                    "完全に解消します。",
                    "sys_d": "がんばる。",
                },
            },
        ],
    },
    {
        "id": "demo-ja###10",
        "turns": [
            {
                "prompt": "子ども向けに、虹ができる仕組みを説明してください。",
                "reference": "太陽の光が空気中の雨粒に入るときに曲がって色ごとに分かれ、"
                "反射して出てくるため、七色に見える。",
                "answers": {
                    "sys_a": "お日さまの光は、じつはいろいろな色がまざってできています。雨あがりの空には小さな水の"
                    "つぶがたくさんうかんでいて、光がその中を通ると、色ごとに少しずつちがう向きに曲がります。"
                    "こうして色がばらばらに分かれて、空に七色の橋のように見えるのが虹です。🌈",
                    "sys_b": "太陽の光が雨つぶの中で曲がって、色ごとに分かれるからです。",
                    "sys_c": "虹は、空にある七色の雲が太陽に照らされて見えるものです。雨の日にだけ雲に色がつきます。",
                    "sys_d": "光の屈折と分散および全反射によるスペクトルの分離現象である。",
                },
                "overrides": {"sys_d": (2.0, 4.5, 3.5, 2.5, 2.0), "sys_c": (2.5, 1.0, 4.0, 3.5, 1.4)},
            }
        ],
    },
    {
        "id": "demo-ja###11",
        "turns": [
            {
                "prompt": "新入社員へのアドバイスを短く書いてください。",
                "reference": "分からないことは早めに質問する、メモを取る、報告・連絡・相談を意識する、など。",
                "answers": {
                    "sys_a": "- 分からないことは、早めに質問しましょう。\n- 教わったことはメモに残し、同じ質問を"
                    "繰り返さない工夫をしましょう。\n- 「報告・連絡・相談」を意識すると、周りが安心して仕事を"
                    "任せてくれます。",
                    "sys_b": "早めに質問し、メモを取り、報連相を大切にしましょう。",
                    "sys_c": "最初の一年は絶対に質問せず、自分だけで解決する力をつけることが何より大切です。",
                    "sys_d": "元気よく。",
                },
                "na": {"factuality": [2]},
            }
        ],
    },
    {
        "id": "demo-ja###12",
        "turns": [
            {
                "prompt": "東京から大阪まで新幹線でおよそ何時間かかりますか？",
                "reference": "のぞみで約2時間半（2時間20分前後）。",
                "answers": {
                    "sys_a": "東海道新幹線の**のぞみ**を使うと、"
                    "東京から新大阪まで約2時間半（最速で2時間20分程度）です。"
                    "ひかりでは約3時間、こだまでは約4時間かかります。",
                    "sys_b": "のぞみで約2時間半です。",
                    "sys_c": "新幹線で約1時間です。リニア中央新幹線がすでに開業しているためです。",
                    "sys_d": "2時間か3時間ぐらい。",
                },
                "overrides": {
                    "sys_b": (3.5, 5.0, 4.8, 5.0, 4.5),
                    "sys_c": (2.5, 1.0, 4.5, 4.0, 1.2),
                    "sys_d": (1.8, 3.8, 3.0, 4.0, 2.8),
                },
            }
        ],
    },
]


def _score(rng: random.Random, quality: float, bias: float) -> int:
    return max(1, min(5, round(quality + bias + rng.gauss(0, 0.6))))


def build_llm_jp_sample(seed: int = 20261121) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    lines = []
    for spec in LLM_JP_PROMPTS:
        turns = []
        for turn in spec["turns"]:
            responses: dict[str, Any] = {}
            for system in SYSTEMS:
                quality = turn.get("overrides", {}).get(system, PROFILES[system])
                evals: dict[str, list[Any]] = {}
                for aspect, aspect_quality in zip(JP_ASPECTS, quality, strict=True):
                    evals[aspect] = [_score(rng, aspect_quality, bias) for bias in RATER_BIAS]
                for aspect, rater_positions in turn.get("na", {}).items():
                    for position in rater_positions:
                        evals[aspect][position] = "NA"
                answer: dict[str, Any] = {
                    "response": turn["answers"][system],
                    "human_evals": evals,
                    "raters": list(JP_RATERS),
                }
                # An automatic judge saw every answer on three aspects; it tracks the humans with its own noise.
                answer["auto_evals"] = {
                    "demo-judge": {
                        aspect: round(min(5.0, max(1.0, q + rng.gauss(0, 0.5))), 2)
                        for aspect, q in zip(JP_ASPECTS, quality, strict=True)
                        if aspect in ("factuality", "relevance", "overall")
                    }
                }
                responses[system] = answer
            turns.append({"prompt": turn["prompt"], "reference": turn["reference"], "responses": responses})
        lines.append({"id": spec["id"], "turns": turns})
    # A rater who skipped a score records 0 in llm-human-eval-jp: a few such gaps, at fixed places.
    for line_index, turn_index, system, aspect, position in [
        (0, 0, "sys_c", "detailedness", 2),
        (4, 0, "sys_d", "fluency", 1),
        (13, 0, "sys_a", "overall", 0),
        (16, 1, "sys_b", "relevance", 2),
        (21, 0, "sys_c", "factuality", 1),
    ]:
        lines[line_index]["turns"][turn_index]["responses"][system]["human_evals"][aspect][position] = 0
    return lines


LFQA_RATERS = ["mturk-a17", "mturk-b04", "mturk-c22", "mturk-d09", "mturk-e31"]
LFQA_CANDIDATES = ["human_top", "human_random", "model_formal", "model_casual"]
LFQA_ASPECTS = ["factuality", "acceptability", "amount_info", "formality"]

# (factuality 0-3, acceptability 0-3, amount_info -1..1, formality -1..1) as the "true" rating of each answer.
LFQA_QUESTIONS: list[dict[str, Any]] = [
    {
        "id": "lfqa-demo-001",
        "question": "Why do we dislike hearing our own recorded voice?",
        "context": [
            "When we speak, we hear our voice through the air and through vibrations in the bones of the skull, "
            "which emphasise lower frequencies.",
            "A recording carries only the airborne sound, so it sounds higher and thinner than the voice we expect.",
        ],
        "answers": {
            "human_top": (
                "Part of what you hear when you talk travels through your skull bones, which boosts the low "
                "tones. A recording only captures the sound that travels through the air, so it sounds thinner "
                "than the voice you are used to, and the mismatch feels wrong.",
                (3, 3, 0, 0),
            ),
            "human_random": ("lol same, i sound like a cartoon chipmunk on every voicemail", (1, 0, -1, -1)),
            "model_formal": (
                "The discomfort arises from a discrepancy between perceived and recorded voice. During speech, "
                "sound reaches the inner ear both through air conduction and through bone conduction, the latter "
                "emphasising lower frequencies. A recording reproduces only the air-conducted component. "
                "Consequently, the recorded voice appears higher-pitched and less resonant, which listeners "
                "frequently judge as unfamiliar and therefore unpleasant.",
                (3, 3, 0, 1),
            ),
            "model_casual": (
                "Basically your head is like a speaker cabinet! When you talk, you hear yourself through your "
                "bones too, so you sound deeper to yourself. The recording skips that part, so it's the 'real' "
                "thinner you. Totally normal to cringe at it.",
                (3, 2, 0, -1),
            ),
        },
        "preference": "human_top",
    },
    {
        "id": "lfqa-demo-002",
        "question": "Why does bread go stale?",
        "answers": {
            "human_top": (
                "Staling is mostly not drying out. The starch in fresh bread is in a soft, disordered state after "
                "baking; as it cools and sits, the starch molecules slowly line up again into a firmer, "
                "crystal-like structure (retrogradation). That is why stale bread softens again if you warm it.",
                (3, 3, 0, 0),
            ),
            "human_random": ("Because the air sucks all the water out of it.", (1, 1, -1, -1)),
            "model_formal": (
                "Bread becomes stale primarily through starch retrogradation: gelatinised starch gradually "
                "recrystallises during storage, increasing firmness. Moisture migration from crumb to crust "
                "contributes as well. Refrigeration accelerates retrogradation, whereas freezing halts it.",
                (3, 3, 0, 1),
            ),
            "model_casual": (
                "It's the starch! After baking it's all relaxed and soft, then over a day or two it stiffens "
                "back up. Oh and tip: don't keep bread in the fridge, that makes it go stale faster.",
                (3, 3, 0, -1),
            ),
        },
        "preference": "model_formal",
    },
    {
        "id": "lfqa-demo-003",
        "question": "How do noise-cancelling headphones work?",
        "answers": {
            "human_top": (
                "Small microphones on the ear cups pick up the outside noise, and the electronics play the same "
                "sound wave flipped upside down. When the two waves meet they cancel out, which works best for "
                "steady low sounds like engine hum.",
                (3, 3, 0, 0),
            ),
            "human_random": (
                "They have really thick padding that blocks all sound waves from entering the ear.",
                (1, 1, -1, 0),
            ),
            "model_formal": (
                "Active noise cancellation employs microphones to sample ambient sound and a processor that "
                "generates an anti-phase signal. Destructive interference between the ambient sound and the "
                "generated signal attenuates the noise, most effectively at low, stationary frequencies; passive "
                "isolation from the ear cushions handles higher frequencies. Modern devices additionally adapt "
                "the filter continuously to ear fit, and several manufacturers combine feed-forward and feedback "
                "microphones to widen the cancelled frequency band.",
                (3, 2, 1, 1),
            ),
            "model_casual": (
                "Mics listen to the noise around you and the headphones play the exact opposite wave, so they "
                "cancel out. Works great on plane rumble, not so much on people talking.",
                (3, 3, 0, -1),
            ),
        },
        "preference": "human_top",
    },
    {
        "id": "lfqa-demo-004",
        "question": "Why is the ocean salty but rivers are not?",
        "answers": {
            "human_top": (
                "Rivers do carry a little dissolved salt, picked up from rocks. They keep flowing, so it never "
                "builds up in them. The ocean is where it all ends up: water leaves by evaporation but the salt "
                "stays behind, so over millions of years the sea became salty.",
                (3, 3, 0, 0),
            ),
            "human_random": (
                "The ocean is salty because of all the fish. Rivers have fewer fish.",
                (0, 0, -1, -1),
            ),
            "model_formal": (
                "Rivers transport small quantities of dissolved ions weathered from continental rock. Because "
                "river water is continuously replaced, these ions do not accumulate. In the ocean, evaporation "
                "removes water but not dissolved salts, and hydrothermal vents add further minerals, so salinity "
                "has accumulated to its present level of about 3.5 percent.",
                (3, 3, 0, 1),
            ),
            "model_casual": (
                "Rivers are salty too, just barely! They dump that salt into the sea, the sun evaporates the water, "
                "and the salt stays. Repeat for a few million years and boom, salty ocean.",
                (3, 2, 0, -1),
            ),
        },
        "preference": "human_top",
    },
    {
        "id": "lfqa-demo-005",
        "question": "Why do onions make you cry?",
        "answers": {
            "human_top": (
                "Cutting an onion breaks its cells, and enzymes turn sulfur compounds into a gas "
                "(syn-propanethial-S-oxide). When that gas reaches your eyes it irritates nerves there, and your "
                "eyes make tears to wash it away. Chilling the onion or using a sharp knife reduces it.",
                (3, 3, 0, 0),
            ),
            "human_random": ("onions are sad vegetables", (0, 0, -1, -1)),
            "model_formal": (
                "When onion tissue is damaged, the enzyme alliinase and the lachrymatory-factor synthase convert "
                "sulfoxides into syn-propanethial-S-oxide, a volatile irritant. Upon contact with the cornea it "
                "stimulates sensory nerves, triggering reflex tearing.",
                (3, 3, 0, 1),
            ),
            "model_casual": (
                "Chopping onions releases acid straight into the air, and it's basically the same stuff as in "
                "pepper spray, so your eyes burn.",
                (1, 1, 0, -1),
            ),
        },
        "preference": "human_top",
    },
    {
        "id": "lfqa-demo-006",
        "question": "How do vaccines train the immune system?",
        "answers": {
            "human_top": (
                "A vaccine shows your immune system a harmless piece or version of a germ. Your body makes "
                "antibodies and memory cells against it, so if the real germ shows up later, the immune system "
                "recognises it and responds much faster.",
                (3, 3, 0, 0),
            ),
            "human_random": (
                "Vaccines contain a small amount of the disease so you get a mild case of it first.",
                (1, 1, -1, 0),
            ),
            "model_formal": (
                "Vaccines present antigens, either inactivated pathogens, protein subunits or genetic "
                "instructions for producing them, to the immune system. This elicits an adaptive response: B "
                "cells produce specific antibodies and T cells are activated, and long-lived memory cells are "
                "formed, enabling a rapid secondary response upon subsequent exposure.",
                (3, 3, 0, 1),
            ),
            "model_casual": (
                "Think of it as a wanted poster. The vaccine shows your body what the bad guy looks like, so "
                "your immune system remembers and can catch it quick next time.",
                (3, 2, -1, -1),
            ),
        },
        "preference": "model_formal",
    },
    {
        "id": "lfqa-demo-007",
        "question": "Why do airplanes leave white trails in the sky?",
        "answers": {
            "human_top": (
                "Jet engines produce hot, humid exhaust. At cruising altitude the air is extremely cold, so the "
                "water vapour freezes into ice crystals almost instantly, forming a line of cloud called a "
                "contrail. How long it lasts depends on how humid the air is up there.",
                (3, 3, 0, 0),
            ),
            "human_random": ("That's the fuel they dump to make the plane lighter.", (0, 0, -1, -1)),
            "model_formal": (
                "Contrails, or condensation trails, form when water vapour in jet exhaust condenses and freezes "
                "in the cold upper troposphere. Their persistence depends on ambient humidity: in dry air they "
                "sublimate within seconds, whereas in ice-supersaturated air they may spread into cirrus-like "
                "clouds lasting hours. Historically, these observations were documented by high-altitude bomber "
                "crews during the Second World War, when persistent trails posed tactical problems, and research "
                "into mitigating them through altitude changes continues today.",
                (3, 2, 1, 1),
            ),
            "model_casual": (
                "It's basically the plane's breath freezing! Engines puff out water vapour, it's super cold up "
                "there, so it turns into a skinny ice cloud.",
                (3, 3, 0, -1),
            ),
        },
        "preference": "human_top",
    },
    {
        "id": "lfqa-demo-008",
        "question": "Why do cats purr?",
        "answers": {
            "human_top": (
                "Cats purr by rapidly twitching the muscles of the larynx while breathing in and out. They do it "
                "when content, but also when stressed, hurt or giving birth, so it seems to be a self-soothing "
                "and communication signal rather than only a sign of happiness.",
                (3, 3, 0, 0),
            ),
            "human_random": ("Because they're happy.", (2, 1, -1, -1)),
            "model_formal": (
                "Purring is produced by rhythmic contraction of the laryngeal muscles, modulated by a neural "
                "oscillator, at roughly 25 to 150 Hz during both inhalation and exhalation. It occurs in "
                "contexts of contentment and of distress, which suggests functions in communication and "
                "self-soothing.",
                (3, 3, 0, 1),
            ),
            "model_casual": (
                "Purring comes from a special purr organ in the cat's chest that only domestic cats have, "
                "it's how they say they love you.",
                (0, 0, 0, -1),
            ),
        },
        "preference": "human_top",
    },
]

LFQA_RUBRIC: dict[str, Any] = {
    "aspects": [
        {
            "name": "factuality",
            "label": "Factuality",
            "description": "Are the claims in the answer accurate? Check doubtful claims with a web search.",
            "min": 0,
            "max": 3,
            "ideal": 3,
            "level": "ordinal",
            "labels": {"0": "inaccurate", "1": "several errors", "2": "minor errors", "3": "accurate"},
            "missing": [None, "NA"],
        },
        {
            "name": "acceptability",
            "label": "Acceptability",
            "description": "Taking everything into account, is this an acceptable answer to the question?",
            "min": 0,
            "max": 3,
            "ideal": 3,
            "level": "ordinal",
            "labels": {"0": "unacceptable", "1": "poor", "2": "acceptable", "3": "fully acceptable"},
            "missing": [None, "NA"],
        },
        {
            "name": "amount_info",
            "label": "Amount of information",
            "description": "Does the answer contain just the information needed to answer the question?",
            "min": -1,
            "max": 1,
            "ideal": 0,
            "level": "ordinal",
            "labels": {"-1": "too little", "0": "just right", "1": "too much"},
            "missing": [None, "NA"],
        },
        {
            "name": "formality",
            "label": "Formality",
            "description": "Is the wording, grammar and spelling suitably formal for an explanation?",
            "min": -1,
            "max": 1,
            "ideal": 0,
            "level": "ordinal",
            "labels": {"-1": "too casual", "0": "appropriate", "1": "too stiff"},
            "missing": [None, "NA"],
        },
    ],
    "systems": {
        "human_top": "ELI5-style top-voted human answer (written for this sample)",
        "human_random": "ELI5-style random human answer (written for this sample)",
        "model_formal": "model answer, formal register (written for this sample)",
        "model_casual": "model answer, casual register (written for this sample)",
    },
}


def _lfqa_score(rng: random.Random, truth: int, lo: int, hi: int) -> int:
    roll = rng.random()
    if roll < 0.15:
        return max(lo, truth - 1)
    if roll < 0.25:
        return min(hi, truth + 1)
    return truth


def build_lfqa_sample(seed: int = 4) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    bounds = [(0, 3), (0, 3), (-1, 1), (-1, 1)]
    lines = []
    for spec in LFQA_QUESTIONS:
        responses: dict[str, Any] = {}
        order = list(LFQA_CANDIDATES)
        rng.shuffle(order)  # candidates are shown shuffled; keep that order in the file as the form saw it
        for candidate in order:
            text, truth = spec["answers"][candidate]
            raters = rng.sample(LFQA_RATERS, 3)
            evals = {
                aspect: [_lfqa_score(rng, truth[i], *bounds[i]) for _ in raters]
                for i, aspect in enumerate(LFQA_ASPECTS)
            }
            # LLM-MATE style judge: scores each aspect separately, with its own noise (mean of 3 samples).
            judge = {
                aspect: round(
                    min(bounds[i][1], max(bounds[i][0], truth[i] + sum(rng.gauss(0, 0.6) for _ in range(3)) / 3)),
                    3,
                )
                for i, aspect in enumerate(LFQA_ASPECTS)
            }
            responses[candidate] = {
                "response": text,
                "human_evals": evals,
                "raters": raters,
                "auto_evals": {"demo-mate-judge": judge},
            }
        turn: dict[str, Any] = {"prompt": spec["question"], "responses": responses}
        if "context" in spec:
            turn["context"] = spec["context"]
        lines.append(
            {
                "id": spec["id"],
                "turns": [turn],
                "meta": {"preference": spec["preference"], "source": "synthetic demo written for evalsite"},
            }
        )
    return lines


def _write_jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for line in lines:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    _write_jsonl(OUT_DIR / "llm_jp_sample.jsonl", build_llm_jp_sample())
    _write_jsonl(OUT_DIR / "lfqa_sample.jsonl", build_lfqa_sample())
    (OUT_DIR / "lfqa_rubric.json").write_text(json.dumps(LFQA_RUBRIC, ensure_ascii=False, indent=2) + "\n")
    print(f"wrote {OUT_DIR}")


if __name__ == "__main__":
    main()
