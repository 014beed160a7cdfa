"""Small knowledge corpora written for these tests (English and Japanese), as JSONL text."""

import json

ENGLISH_DOCUMENTS = [
    {
        "id": "curie",
        "title": "Marie Curie",
        "text": (
            "Marie Curie was a physicist and chemist born in Warsaw in 1867. "
            "She moved to Paris in 1891 to study at the Sorbonne. "
            "In 1903 she shared the Nobel Prize in Physics with Pierre Curie and Henri Becquerel "
            "for work on radioactivity. "
            "In 1911 she received the Nobel Prize in Chemistry for the discovery of polonium and radium. "
            "She died in 1934 in Passy, France."
        ),
    },
    {
        "id": "lovelace",
        "title": "Ada Lovelace",
        "text": (
            "Ada Lovelace was an English mathematician born in London in 1815. "
            "She was the daughter of the poet Lord Byron. "
            "She translated an article about the Analytical Engine designed by Charles Babbage "
            "and added extensive notes. "
            "Her notes describe a method for computing Bernoulli numbers with the machine."
        ),
    },
    {
        "id": "rhine",
        "title": "Rhine",
        "text": (
            "The Rhine is a river that begins in the Swiss Alps. "
            "It flows north through Germany and reaches the North Sea in the Netherlands. "
            "Cities on its banks include Basel, Strasbourg, Cologne and Duesseldorf."
        ),
    },
]

JAPANESE_DOCUMENTS = [
    {
        "id": "fuji",
        "title": "富士山",
        "text": (
            "富士山は静岡県と山梨県にまたがる活火山である。標高は3776メートルで、日本で最も高い山である。"
            "最後の噴火は1707年の宝永噴火である。2013年に世界文化遺産に登録された。"
        ),
    },
    {
        "id": "tokyo-tower",
        "title": "東京タワー",
        "text": (
            "東京タワーは東京都港区芝公園にある電波塔である。1958年に完成した。"
            "高さは333メートルで、設計は内藤多仲が担当した。展望台からは東京の街を一望できる。"
        ),
    },
    {
        "id": "biwa",
        "title": "琵琶湖",
        "text": (
            "琵琶湖は滋賀県にある日本最大の湖である。面積は約670平方キロメートルである。"
            "湖から流れ出る川は瀬田川である。"
        ),
    },
]


def as_jsonl(documents: list[dict[str, str]]) -> str:
    return "".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in documents)
