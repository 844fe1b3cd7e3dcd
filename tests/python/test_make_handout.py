#!/usr/bin/env python3
"""scripts/make_handout.py: every lesson in one page, figures embedded, lesson links inside
the page, and a missing image is an error rather than a hole."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "scripts", "make_handout.py")

try:
    import markdown  # noqa: F401
    HAVE_MARKDOWN = True
except ImportError:
    HAVE_MARKDOWN = False


@unittest.skipUnless(HAVE_MARKDOWN or os.environ.get("CI") == "true",
                     "Python-Markdown not installed (bash scripts/setup.sh installs python3-markdown)")
class MakeHandoutTest(unittest.TestCase):
    def test_every_lesson_in_one_page(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "h.html")
            r = subprocess.run([sys.executable, TOOL, "--out", out], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            page = open(out, encoding="utf-8").read()
            lessons = sorted(f for f in os.listdir(os.path.join(ROOT, "lessons")) if re.match(r"^\d\d-", f)
                             and os.path.isfile(os.path.join(ROOT, "lessons", f, "README.md")))
            self.assertGreaterEqual(len(lessons), 10)
            for folder in lessons:
                self.assertIn(f'id="lesson-{folder[:2]}"', page)
            # Every image of every lesson text is embedded, none left as a file path.
            images = sum(len(re.findall(r"!\[[^\]]*\]\(", open(os.path.join(ROOT, "lessons", f, "README.md"),
                                                                 encoding="utf-8").read())) for f in lessons)
            self.assertEqual(page.count('src="data:image/'), images)
            self.assertNotIn('href="../', page)  # no link into a repository the reader does not have

    def test_a_missing_image_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "repo")
            os.makedirs(os.path.join(fake, "scripts"))
            os.makedirs(os.path.join(fake, "lessons", "01-x"))
            shutil.copy(TOOL, os.path.join(fake, "scripts"))
            with open(os.path.join(fake, "lessons", "01-x", "README.md"), "w") as f:
                f.write("# Lesson 01\n\n![a plot](plot.png)\n")
            r = subprocess.run([sys.executable, os.path.join(fake, "scripts", "make_handout.py"),
                                "--out", os.path.join(d, "h.html")], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1)
            self.assertIn("image plot.png does not exist", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "h.html")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
