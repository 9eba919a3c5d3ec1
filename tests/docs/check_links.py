"""Every link of the repository's Markdown files resolves: relative links name a file or folder
that exists, and a `#anchor` names a heading of the file it points to. Code comments and scripts
that name a `bench/results/...` folder name one that exists, and where they cite a doc's section
(`docs/kernels/fp8.md, "Encoder"`), the doc has a heading that begins with that title. Prints
each broken link; exit 1 if any.

    python3 tests/docs/check_links.py REPOSITORY_ROOT
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
RESULTS = re.compile(r"bench/results/([A-Za-z0-9][A-Za-z0-9._-]*)")
SECTION = re.compile(r"(docs/[A-Za-z0-9_/.-]+\.md),? \"([^\"]+)\"")
COMMENT_BREAK = re.compile(r"\s*\n\s*(?://+|\*|#)?\s*")


def anchor_of(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as f:
        return {anchor_of(line.lstrip("#")) for line in f if line.startswith("#")}


def headings(path):
    with open(path, encoding="utf-8") as f:
        return [line.lstrip("#").strip().lower() for line in f if line.startswith("#")]


def main():
    root = os.path.abspath(sys.argv[1])
    try:
        files = subprocess.run(["git", "-C", root, "ls-files"], check=True, capture_output=True,
                               text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but builds
        files = [os.path.relpath(os.path.join(d, f), root)
                 for d, dirs, names in os.walk(root)
                 for f in names
                 if not os.path.relpath(d, root).split(os.sep)[0].startswith(("build", "."))]
    broken = []
    for name in files:
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            continue  # deleted in the work tree
        if name.endswith(".md"):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for target in LINK.findall(text):
                if re.match(r"[a-z]+:", target):
                    continue  # http:, https:, mailto:
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                if not os.path.exists(dest):
                    broken.append(f"{name}: {target} (no such file)")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    broken.append(f"{name}: {target} (no such heading)")
        if name.startswith("bench/results/") or not name.endswith(
                (".md", ".h", ".cpp", ".cu", ".cuh", ".sh", ".py", ".txt")):
            continue  # the results' own logs and data record paths as they were
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for folder in RESULTS.findall(text):
            if not os.path.isdir(os.path.join(root, "bench/results", folder)):
                broken.append(f"{name}: bench/results/{folder} (no such folder)")
        # A citation may wrap from one comment line to the next.
        for doc, title in SECTION.findall(COMMENT_BREAK.sub(" ", text)):
            doc_path = os.path.join(root, doc)
            if not os.path.isfile(doc_path):
                broken.append(f"{name}: {doc} (no such file)")
            elif not any(h.startswith(title.lower()) for h in headings(doc_path)):
                broken.append(f'{name}: {doc}, "{title}" (no such section)')
    for line in sorted(set(broken)):
        print(line)
    print(f"{len(files)} files checked, {len(set(broken))} broken links")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
