"""The report's HTML page in a real headless browser (Debian's chromium, driven by selenium):
it loads without a JavaScript error, its tables hold the numbers results.parquet gives, a
click on a header sorts, a filter hides rows, marks and commands show on hover, each table's
notes are folded until opened, and a screenshot is written. Chromium and its driver are
installed with apt-get when missing (skipped only without apt-get, root or network)."""

from __future__ import annotations

import base64
import io
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from pipeline.fields import MAG_FIELDS
from pipeline.layout import REPORT_PAGE_SUFFIX, RESULTS_FILE, format_size, report_file, reports_dir
from pipeline.report.build import build_report
from tests.conftest import apt_install
from tests.report.conftest import REPORT_CORPUS

pytestmark = pytest.mark.slow  # a browser, and the fixture data's pools searched and scored

WIDTH = 1400


def browser_tools() -> tuple[str, str] | None:
    found = shutil.which("chromium"), shutil.which("chromedriver")
    return found if all(found) else None  # type: ignore[return-value]


def headless_chromium(chromium: str, chromedriver: str):
    """Headless chromium through selenium, its console kept (this test and
    benchmarks/report_html.py)."""
    options = Options()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", f"--window-size={WIDTH},1000"):
        options.add_argument(argument)
    options.binary_location = chromium
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(chromedriver))


def install_chromium() -> tuple[str, str]:
    """Debian's chromium and chromium-driver, unless installed: (browser, driver)."""
    apt_install(("chromium", "chromium-driver"), lambda: browser_tools() is not None)
    return browser_tools()  # type: ignore[return-value]


@pytest.fixture(scope="module")
def page(report_data, tmp_path_factory) -> Path:
    """The fixture data's report page, saved under a copy of its runs folder."""
    runs = tmp_path_factory.mktemp("browser") / "runs"
    shutil.copytree(report_data / "runs", runs)
    build_report(runs, REPORT_CORPUS, 0, report_data / "corpora").save()
    return report_file(reports_dir(runs), REPORT_CORPUS, suffix=REPORT_PAGE_SUFFIX)


@pytest.fixture(scope="module")
def browser(page):
    """Headless chromium with the page open (its console kept)."""
    driver = headless_chromium(*install_chromium())
    try:
        driver.get(page.as_uri())
        yield driver
    finally:
        driver.quit()


def table(driver, name: str):
    return driver.find_element(By.CSS_SELECTOR, f'table.data[data-name="{name}"]')


def cells(driver, name: str) -> tuple[list[str], list[list[str]]]:
    """A table's header and its visible rows' cells, as the browser shows them."""
    return driver.execute_script("""
        const t = document.querySelector('table.data[data-name="' + arguments[0] + '"]');
        const text = (c) => c.textContent.trim();
        return [Array.from(t.tHead.rows[0].cells, text),
                Array.from(t.tBodies[0].rows).filter((r) => !r.hidden)
                     .map((r) => Array.from(r.cells, text))];""", name)


def leading(text: str) -> float:
    return float(re.match(r"[\[(]?\s*([-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)", text).group(1))


def test_the_page_loads_without_errors(browser):
    assert browser.execute_script("return document.readyState") == "complete"
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors
    # the script ran: every header sorts
    assert table(browser, "dataset").find_element(By.TAG_NAME, "th").get_attribute(
        "title").startswith("sort by this column")


def test_the_summary_is_the_first_thing_shown(browser):
    """The page opens with the finding: the first section below the title is the summary,
    its heading above its sentences, all visible, before any table."""
    first = browser.find_elements(By.CSS_SELECTOR, "section")[0]
    assert first.get_attribute("id") == "s-summary"
    text = first.text
    assert text.startswith("Summary") and "bm25 is best" in text, text[:300]
    top = first.rect["y"]
    assert all(t.rect["y"] > top for t in browser.find_elements(By.CSS_SELECTOR, "table.data"))


def test_the_tables_hold_the_numbers_of_results_parquet(browser, page):
    """The dataset- and field-level tables against means computed here from the per-query
    rows: mean over a pool's queries, then mean ± std over repeats, x100."""
    rows = pl.read_parquet(page.parents[1] / RESULTS_FILE).filter(
        pl.col("corpus") == REPORT_CORPUS, pl.col("negatives") == "all")
    per_run = rows.group_by("level", "field", "size", "model", "repeat", "metric").agg(
        pl.col("value").mean() * 100)
    summary = per_run.group_by("level", "field", "size", "model", "metric").agg(
        mean=pl.col("value").mean(), std=pl.col("value").std())
    value = {(lv, f, s, mo, me): (m, sd) for lv, f, s, mo, me, m, sd in summary.iter_rows()}

    header, shown = cells(browser, "dataset")
    sizes = sorted(rows.filter(pl.col("level") == "dataset")["size"].unique().to_list())
    assert header == ["model", *[f"{format_size(s)} (MAP / NDCG / R@30)" for s in sizes]]
    assert [r[0] for r in shown] == ["bm25", "random"]
    for model, *texts in shown:
        for size, text in zip(sizes, texts, strict=True):
            expected = " / ".join(
                "{:.1f} ± {:.1f}".format(*value[("dataset", None, size, model, metric)])
                for metric in ("map", "ndcg", "recall@30"))
            assert text.replace("†", "") == expected, (model, size)

    header, shown = cells(browser, "field-600")
    fields = [f for f in MAG_FIELDS if f in set(rows["field"].drop_nulls().to_list())]
    assert header == ["model", *[MAG_FIELDS[f] for f in fields], "avg"]
    for model, *texts in shown:
        means = [value[("field", f, 600, model, "map")][0] for f in fields]
        assert [t.replace("†", "") for t in texts] == [
            *[f"{m:.1f}" for m in means], f"{sum(means) / len(means):.1f}"], model


def test_a_click_on_a_header_sorts(browser):
    """Numbers by value (the bootstrap table's means), text in natural order (its pools),
    the other way on a second click."""
    name = "significance-intervals"
    header, before = cells(browser, name)
    mean = header.index("mean")
    heads = table(browser, name).find_elements(By.TAG_NAME, "th")
    heads[mean].click()
    assert heads[mean].get_attribute("aria-sort") == "ascending"
    _, up = cells(browser, name)
    values = [leading(r[mean]) for r in up]
    assert values == sorted(values) and values != [leading(r[mean]) for r in before]
    assert sorted(map(tuple, up)) == sorted(map(tuple, before))  # the same rows, moved
    heads[mean].click()
    assert heads[mean].get_attribute("aria-sort") == "descending"
    _, down = cells(browser, name)
    assert [leading(r[mean]) for r in down] == sorted(values, reverse=True)
    heads[0].click()  # pools: all-800 before all-1600 (numbers in text compared as numbers)
    _, by_pool = cells(browser, name)
    pools = list(dict.fromkeys(r[0] for r in by_pool))
    assert pools.index("all-800") < pools.index("all-1600")
    assert heads[mean].get_attribute("aria-sort") is None


def test_a_filter_hides_rows(browser):
    name = "significance-intervals"
    _, every = cells(browser, name)
    box = table(browser, name).find_element(By.XPATH, "ancestor::div[@class='block']"
                                            ).find_element(By.CSS_SELECTOR, "input.filter")
    box.send_keys("random ndcg")
    _, kept = cells(browser, name)
    expected = [r for r in every if r[2] == "random" and r[1] == "ndcg"]
    assert kept and sorted(kept) == sorted(expected) and len(kept) < len(every)
    count = box.find_element(By.XPATH, "ancestor::div[@class='block']//span[@class='count']")
    assert count.text == f"{len(kept)} of {len(every)} rows"
    box.clear()
    box.send_keys(" ")  # an emptied box shows every row again
    assert len(cells(browser, name)[1]) == len(every)


def test_marks_and_commands_say_what_they_are_on_hover(browser):
    dataset = table(browser, "dataset")
    mark = dataset.find_element(By.CSS_SELECTOR, "abbr.sig")
    assert "95% interval of its difference excludes 0" in mark.get_attribute("title")
    assert dataset.find_element(By.TAG_NAME, "b").get_attribute("title") == "best MAP"
    # a result cell has no title in the page: the script writes its own row's command on hover
    for model in ("bm25", "random"):
        cell = dataset.find_element(By.XPATH, f".//tbody/tr[td[1]='{model}']/td[2]")
        assert not cell.get_attribute("title"), model
        ActionChains(browser).move_to_element(cell).perform()
        assert cell.get_attribute("title") == (f"made again by: make eval "
                                               f"CORPUS={REPORT_CORPUS} MODEL={model}, then "
                                               f"make report CORPUS={REPORT_CORPUS} SEED=0")


def test_the_notes_are_folded_under_each_table_until_opened(browser):
    """Each table's notes (the method) sit under it in a closed <details>: not shown until its
    summary is clicked, shown then, folded again by a second click."""
    blocks = browser.find_elements(By.CSS_SELECTOR, "div.block:has(table.data.result)")
    assert blocks and all(b.find_elements(By.CSS_SELECTOR, "details.notes") for b in blocks)
    folded = browser.find_elements(By.CSS_SELECTOR, "details.notes")
    assert not any(d.get_attribute("open") for d in folded)
    assert not any(li.is_displayed() for li in browser.find_elements(
        By.CSS_SELECTOR, "details.notes li"))
    notes = table(browser, "dataset").find_element(
        By.XPATH, "ancestor::div[@class='block']").find_element(By.CSS_SELECTOR, "details.notes")
    items = notes.find_elements(By.TAG_NAME, "li")
    assert items and not any(li.is_displayed() for li in items)
    notes.find_element(By.TAG_NAME, "summary").click()
    assert notes.get_attribute("open") is not None
    assert all(li.is_displayed() and li.text for li in items)
    assert any("docs/evaluation.md#" in li.text for li in items)
    notes.find_element(By.TAG_NAME, "summary").click()  # folded again: the page as it was
    assert notes.get_attribute("open") is None and not any(li.is_displayed() for li in items)


def test_a_screenshot_is_written(browser, tmp_path):
    """The whole page as a PNG (kept under pytest's temporary folder, to be looked at)."""
    from PIL import Image, ImageChops, ImageStat

    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(WIDTH, min(height, 6000))
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    image = Image.open(shot).convert("RGB")
    assert image.width >= WIDTH - 100 and image.height > 1000
    # the page as styled and drawn where the browser laid it out: the header's background
    # (page.css) at its corner, and each plot shown is its own picture
    laid = browser.execute_script("""
        const box = (e) => {  // the content box: inside border and padding
            const r = e.getBoundingClientRect(), c = getComputedStyle(e);
            const left = r.left + e.clientLeft + parseFloat(c.paddingLeft);
            const top = r.top + e.clientTop + parseFloat(c.paddingTop);
            return [left, top, left + parseFloat(c.width) - parseFloat(c.paddingLeft)
                    - parseFloat(c.paddingRight) - parseFloat(c.borderLeftWidth)
                    - parseFloat(c.borderRightWidth), top + parseFloat(c.height)
                    - parseFloat(c.paddingTop) - parseFloat(c.paddingBottom)
                    - parseFloat(c.borderTopWidth) - parseFloat(c.borderBottomWidth)
                   ].map(Math.round); };
        return {ratio: window.devicePixelRatio, header: box(document.querySelector("header")),
                plots: Array.from(document.querySelectorAll("figure.plot img"),
                                  (i) => [box(i), i.naturalWidth, i.src])};""")
    assert laid["ratio"] == 1 and laid["plots"]
    left, top, *_ = laid["header"]
    assert image.getpixel((left + 3, top + 3)) == (0xfa, 0xfb, 0xfc)
    visible = [plot for plot in laid["plots"] if plot[0][3] <= image.height]
    assert visible and all(natural for _, natural, _ in visible)  # every one loaded
    for (left, top, right, bottom), _, src in visible:
        plot = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).convert("RGB")
        assert plot.size == (right - left, bottom - top)  # shown at its own size
        got = image.crop((left, top, right, bottom))
        difference = ImageStat.Stat(ImageChops.difference(got, plot)).mean
        assert max(difference) < 1, (src[:40], difference)  # the picture, pixel for pixel
        assert len(plot.getcolors(maxcolors=1 << 20) or []) > 20  # a picture, not a blank


# names holding what HTML, JSON, LaTeX and shells treat specially (issue 39, case 7): `<!--`
# then `<script` in the page's JSON block made chromium swallow page.js
HOSTILE_CORPUS = "c<!--<script>x%y&z_1#$\\x$"
HOSTILE_MODEL = "m</script><!--<script>a|b\u2028&c"
HOSTILE_POOL = "all-800-r0<!--<script>&"
HOSTILE_LABEL = "x%y&z_1#<!--<script>|"


@pytest.fixture(scope="module")
def hostile_page(report_data, tmp_path_factory) -> Path:
    """The fixture data reported under hostile names: the corpus (its folder's files linked),
    a pool (its folder linked under the name), the random model (in results.parquet) and a
    TRAINING_SETS label (the leakage table)."""
    root = tmp_path_factory.mktemp("hostile")
    source = report_data / "corpora" / REPORT_CORPUS
    corpus = root / "corpora" / HOSTILE_CORPUS
    (corpus / "pools").mkdir(parents=True)
    for path in source.iterdir():
        if path.name != "pools":
            (corpus / path.name).symlink_to(path)
    for pool in (source / "pools").iterdir():
        name = HOSTILE_POOL if pool.name == "all-800-r0" else pool.name
        (corpus / "pools" / name).symlink_to(pool)
    runs = root / "runs"
    runs.mkdir()
    pl.read_parquet(report_data / "runs" / RESULTS_FILE).with_columns(
        corpus=pl.lit(HOSTILE_CORPUS),
        pool=pl.col("pool").replace({"all-800-r0": HOSTILE_POOL}),
        model=pl.col("model").replace({"random": HOSTILE_MODEL})).write_parquet(
        runs / RESULTS_FILE)
    queries = pl.read_parquet(source / "pools" / "all-800-r0" / "queries.parquet")["corpusid"]
    listed = root / "trained.txt"
    listed.write_text("".join(f"{i}\n" for i in queries.to_list()[:5]))
    build_report(runs, HOSTILE_CORPUS, 0, root / "corpora",
                 training_sets={HOSTILE_LABEL: str(listed)}).save()
    return report_file(reports_dir(runs), HOSTILE_CORPUS, suffix=REPORT_PAGE_SUFFIX)


def test_hostile_names_leave_the_pages_script_running(hostile_page):
    """Every name shows as itself, and page.js runs: headers sort, and a hostile model's
    cell names on hover what makes it again (for a model make has no name for, the Python
    call that does), its names shown as they are."""
    import ast
    import re

    from pipeline.encoding.objects import object_repair

    driver = headless_chromium(*install_chromium())
    try:
        driver.get(hostile_page.as_uri())
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors
        assert driver.title == f"Results: {HOSTILE_CORPUS} (pools of seed 0)"
        heads = table(driver, "dataset").find_elements(By.TAG_NAME, "th")
        assert heads[0].get_attribute("title").startswith("sort by this column")
        _, shown = cells(driver, "dataset")
        assert [r[0] for r in shown] == [HOSTILE_MODEL, "bm25"]
        heads[1].click()  # the script sorts
        assert heads[1].get_attribute("aria-sort") == "ascending"
        cell = driver.execute_script("""
            const t = document.querySelector('table.data[data-name="dataset"]');
            return Array.from(t.tBodies[0].rows).find(
                (r) => r.cells[0].textContent.trim() !== 'bm25').cells[1];""")
        ActionChains(driver).move_to_element(cell).perform()
        title = cell.get_attribute("title")
        assert title.startswith("made again by: "), title
        # make has no model of that name: its repair is the Python call, the names as literals
        literal = r"'(?:[^'\\]|\\.)*'"  # a Python string literal, as repr writes it
        called = re.search(rf"pipeline\.search\(<data>, ({literal}), ({literal})", title)
        assert called and ast.literal_eval(called.group(1)) == HOSTILE_CORPUS, title
        pool = ast.literal_eval(called.group(2))  # the pool of the run the page names
        repair = object_repair(HOSTILE_CORPUS, HOSTILE_MODEL, pool).command()
        assert title.split(", then make report", 1)[0] == f"made again by: {repair}"
        assert repr(HOSTILE_MODEL) in title and repr(HOSTILE_CORPUS) in title
        leakage, _ = cells(driver, "leakage")
        assert f"{HOSTILE_LABEL}: queries in training" in leakage
        _, pools = cells(driver, "provenance-pools")
        assert HOSTILE_POOL in [r[0] for r in pools]
    finally:
        driver.quit()
