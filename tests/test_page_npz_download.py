"""The run's NPZ download as a browser fetches it: the route ``viz_app/npz_download.py`` adds to the server that
serves the page (reached through ``viz_app/panel_internals.tornado_application``) streams the file as an attachment."""

from __future__ import annotations

import io
import re
from urllib.parse import urljoin

import numpy as np
from conftest import RUN_SECONDS
from playwright.sync_api import expect
from test_page import n_tokens_of

from model_backend import capture_run
from page_driving.sync_steps import run_prompt, wait_until_settled


def test_the_prepared_npz_is_served_as_an_attachment_with_the_runs_values(page_with_checks, served_app, tiny_model):
    page = page_with_checks
    prompt = "An export, fetched"
    run_prompt(page, prompt, n_tokens_of(tiny_model, prompt))
    wait_until_settled(page)
    page.get_by_role("button", name="Prepare the run's NPZ").click()
    link = page.locator(".npz-link a")
    expect(link).to_have_attribute("href", re.compile(r"^/rse-downloads/"), timeout=RUN_SECONDS)
    response = page.request.get(urljoin(served_app.url, link.get_attribute("href")))
    assert response.status == 200
    assert re.fullmatch(r'attachment; filename="tiny-gpt2\d*-An-export-fetched\.npz"',
                        response.headers["content-disposition"])
    with np.load(io.BytesIO(response.body()), allow_pickle=False) as npz:
        expected = capture_run(tiny_model, prompt, bos=True)
        np.testing.assert_array_equal(npz["token_ids"], expected.token_ids)
        assert npz["layers.0.layer_output"].dtype == np.float32
