"""The judge-calibration estimators are part of the curated stats surface."""

import subprocess
import sys

import clinieval.stats as stats

CALIBRATION = {"CalibratedMean", "Licence", "NoEstimate", "PPIMean", "calibrated_answer_mean",
               "calibrated_rating_mean", "licence_stratum", "macro_f1_counts", "ppi_mean"}


def test_calibration_estimators_are_exported():
    assert CALIBRATION <= set(stats.__all__)


def test_calibrated_module_imports_first_without_a_cycle():
    # the submodule is loaded before the package's re-exports exist
    code = "import clinieval.stats.calibrated, clinieval.stats.licence"
    subprocess.run([sys.executable, "-c", code], check=True)
