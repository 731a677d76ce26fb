"""Reading chart specs in tests: the inline datasets a Vega-Lite spec's marks draw."""


def datasets(node, root=None) -> list[list[dict]]:
    """Every inline dataset a spec's marks use (`data.values`, or a named top-level dataset)."""
    root = node if root is None else root
    found = []
    if isinstance(node, dict):
        data = node.get("data")
        if isinstance(data, dict):
            if "values" in data:
                found.append(data["values"])
            elif "name" in data:
                found.append(root["datasets"][data["name"]])
        for key, value in node.items():
            if key != "datasets":
                found += datasets(value, root)
    elif isinstance(node, list):
        for value in node:
            found += datasets(value, root)
    return found
