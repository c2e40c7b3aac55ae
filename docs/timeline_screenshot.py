"""Take the timeline view's screenshot (docs/images/web-timeline.png) in headless Chromium.

    python docs/timeline_screenshot.py

`daybook demo` fills a fresh store (its agent is killed with SIGKILL mid-wire and resumed by a
new process); `daybook web` serves it on a free port; Selenium with the system chromedriver opens
the run's timeline, clicks the wire's bar and photographs the page with the wire's rows shown.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from screenshots import inspector  # docs/screenshots.py: run as a script, docs/ is on the path

from daybook import Daybook

HERE = Path(__file__).parent


def main() -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    url = f"sqlite:///{tempfile.mkdtemp(prefix='daybook-shot-')}/demo.db"
    subprocess.run([sys.executable, "-m", "daybook", "demo", "--db", url], check=True, capture_output=True)
    with Daybook(url) as book:
        run_id = book.runs(None, 1)[0].run_id
    with inspector(url, "1280,1250") as (base, driver):
        driver.get(f"{base}/runs/{quote(run_id, safe='')}?view=timeline")
        for _ in range(200):
            if driver.find_element(By.ID, "view").get_attribute("data-ready") == "1":
                break
            time.sleep(0.05)
        box = driver.find_element(By.ID, "timeline-chart")
        # The wire: the first bar on the effects lane, clicked halfway along.
        px, py = driver.execute_script(
            "var chart = echarts.getInstanceByDom(arguments[0]);"
            "var bars = chart.getOption().series.filter(function (s) { return s.name === 'resolved'; })[0];"
            "var b = bars.data[0];"
            "return chart.convertToPixel({gridIndex: 0}, [(b[0] + b[1]) / 2, b[2]]);",
            box,
        )
        size = box.size
        ActionChains(driver).move_to_element_with_offset(
            box, round(px - size["width"] / 2), round(py - size["height"] / 2)
        ).click().perform()
        for _ in range(100):
            if driver.find_element(By.ID, "timeline-rows").get_attribute("data-loaded") == "1":
                break
            time.sleep(0.05)
        driver.execute_script("document.getElementById('timeline-rows').scrollIntoView(false)")
        (HERE / "images").mkdir(exist_ok=True)
        out = HERE / "images" / "web-timeline.png"
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(out))
    print("wrote", out)


if __name__ == "__main__":
    main()
