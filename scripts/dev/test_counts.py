"""Counts the GPU test cases that a ctest run selected and those that ran, so that a device run
reports "ran N of N" instead of a count of processes (cclz_register_gpu_test runs each GPU test
executable as shards, and each shard writes gtest's XML report under CCLZ_TEST_XML_DIR).

    python3 scripts/dev/test_counts.py BUILD_DIR XML_DIR [ctest selection, e.g. -L quick]

Expected: every test the selection names that runs tests/support/run_gtest.sh, listed once per
(executable, filter, environment) with --gtest_list_tests. Ran: the <testcase> elements of the
XML reports. Prints one line; exits 1 if fewer ran than expected or any failed."""
import glob
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def expected_cases(build, selection):
    shown = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1", *selection],
                           check=True, capture_output=True, text=True).stdout
    seen, total = set(), 0
    for test in json.loads(shown)["tests"]:
        command = test.get("command") or []
        if len(command) < 2 or not command[0].endswith("run_gtest.sh"):
            continue
        env = {}
        for prop in test.get("properties", []):
            if prop["name"] == "ENVIRONMENT":
                env = dict(v.split("=", 1) for v in prop["value"] if "=" in v)
        env = {k: v for k, v in env.items() if not k.startswith("GTEST_")}
        key = (tuple(command[1:]), tuple(sorted(env.items())))
        if key in seen:
            continue
        seen.add(key)
        listed = subprocess.run([*command[1:], "--gtest_list_tests"], check=True,
                                capture_output=True, text=True, env={**os.environ, **env}).stdout
        total += sum(1 for line in listed.splitlines() if line.startswith("  ") and line.strip())
    return total


def ran_cases(xml_dir):
    ran = failed = skipped = 0
    for path in glob.glob(os.path.join(xml_dir, "*.xml")):
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.get("status") == "notrun":
                continue
            ran += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None or case.get("result") == "skipped":
                skipped += 1
    return ran, failed, skipped


def main():
    build, xml_dir, selection = sys.argv[1], sys.argv[2], sys.argv[3:]
    expected = expected_cases(build, selection)
    ran, failed, skipped = ran_cases(xml_dir)
    print(f"GPU test cases: {ran} of {expected} ran, {ran - failed - skipped} passed, "
          f"{failed} failed, {skipped} skipped")
    sys.exit(0 if ran == expected and failed == 0 else 1)


if __name__ == "__main__":
    main()
