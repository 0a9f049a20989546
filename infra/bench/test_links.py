"""Unit tests of infra/bench/links.py: the rotation of phases, the summary's medians, peaks and
ratios, and the report."""

import unittest

from infra.bench import links

GIB = 1 << 30


class OrderTest(unittest.TestCase):
    def test_each_phase_leads_once_in_three_rounds(self):
        firsts = [links.order_of(r)[0] for r in range(3)]
        self.assertEqual(sorted(firsts), sorted(links.PHASES))
        for r in range(3):
            self.assertEqual(sorted(links.order_of(r)), sorted(links.PHASES))


class SummaryTest(unittest.TestCase):
    def test_medians_peaks_and_ratios(self):
        def run(mb_s, cpu, rss):
            return {"bytes": GIB, "seconds": GIB / (mb_s * 1e6), "cpu": cpu, "rss_kib": rss}

        samples = {
            "api": [run(1000, 1.0, 100 * 1024), run(900, 1.2, 120 * 1024), run(1100, 0.8, 110 * 1024)],
            "link": [run(950, 1.1, 100 * 1024), run(950, 1.1, 100 * 1024), run(950, 1.1, 130 * 1024)],
            "zip": [run(500, 2.0, 200 * 1024), run(600, 2.0, 210 * 1024), run(550, 2.0, 205 * 1024)],
        }
        s = links.summarize(samples)
        self.assertEqual(s["api"], {"mb_s": 1000.0, "cpu_s_per_gib": 1.0, "peak_rss_mib": 120.0, "runs": 3})
        self.assertEqual(s["link"]["peak_rss_mib"], 130.0)
        self.assertEqual(s["zip"]["mb_s"], 550.0)
        self.assertEqual(s["link_vs_api"], 0.95)
        self.assertEqual(s["zip_vs_api"], 0.55)
        report = links.format_report(s, 1024).splitlines()
        self.assertEqual(report[0], "1 file of 1024 MiB, and a folder of 16 files of 64 MiB as a zip (median of 3 runs)")
        self.assertEqual(report[2].split(), ["api", "1000.0", "1.000", "120.0"])
        self.assertEqual(report[-1], "link / api: 0.950   zip / api: 0.550")


if __name__ == "__main__":
    unittest.main()
