// CustomJS on document_ready.
// One listener for the whole page, added once the document is ready: clicks cross the widgets' shadow roots, and
// the first element of the click's path is the label that was clicked.
if (!window.rseLabelClicksToggle) {
    window.rseLabelClicksToggle = true;
    document.addEventListener("click", event => {
        const clicked = event.composedPath()[0];
        if (!(clicked instanceof Element) || !clicked.classList.contains("bk-label")) return;
        const box = clicked.previousElementSibling;
        if (box && box.matches("input[type=checkbox]") && !box.disabled) box.click();
    });
}
