// CustomJS on a highlight source's data (args: source, fig, renderer).
// Scrolls whatever holds the figure (the tabs' column below an open lesson, else the page's main area) to show, below
// the lesson panel, the figure's first labelled mark with, best first: the controls above the figure (the start of
// the column that holds it under other things) and the whole figure, where they fit together; else the figure's
// title; else the mark in the middle. What is on screen already stays where the mark and the title are in view and
// the controls and the whole figure are too or could not be (a tab keeps the scroll the previous tab left). A
// sideways-scrolling figure (the attribution's many bars) is scrolled to the mark. Retried until the figure is drawn
// with the new marks.
const labelled = source.data.label.findIndex(label => label);
if (labelled < 0) return;
const scroll = tries => {
    const view = Bokeh.index.query_one(v => v.model === fig);
    const glyph = view && view.has_finished() ? view.views.get_one(renderer).glyph : null;
    if (!glyph || glyph.sy == null || glyph.sy.length <= labelled || !view.el.isConnected) {
        if (tries > 0) setTimeout(() => scroll(tries - 1), 150);
        return;
    }
    const canvas = view.canvas_view.el.getBoundingClientRect(), x = canvas.left + glyph.sx[labelled];
    let across = null, down = null;
    for (let el = view.el; el && el.id !== "main"; el = el.parentNode instanceof ShadowRoot ? el.parentNode.host
                                                                                           : el.parentNode) {
        if (!(el instanceof Element)) continue;
        const style = getComputedStyle(el);
        if (!across && /auto|scroll/.test(style.overflowX) && el.scrollWidth > el.clientWidth) across = el;
        if (!down && /auto|scroll/.test(style.overflowY) && el.scrollHeight > el.clientHeight) down = el;
    }
    if (across) {
        const box = across.getBoundingClientRect();
        across.scrollLeft += x - (box.left + box.width / 2);
    }
    down = down || document.getElementById("main");
    const panel = document.querySelector(".lesson-area");
    const top = Math.max(panel ? panel.getBoundingClientRect().bottom : 0, down.getBoundingClientRect().top);
    const bottom = Math.min(window.innerHeight, down.getBoundingClientRect().bottom);
    const y = canvas.top + glyph.sy[labelled];
    let controls = null;
    for (let branch = view, up = view.parent; up && !up.model.type.endsWith("Tabs"); branch = up, up = up.parent) {
        const children = up.model.children;
        if (Array.isArray(children) && children.indexOf(branch.model) > 0) {
            controls = up.el.getBoundingClientRect().top;
            break;
        }
    }
    const together = controls !== null && canvas.bottom - controls <= bottom - top;
    const markShown = by => y - by >= top + 40 && y - by <= bottom - 40;
    const wholeShown = controls >= top - 1 && canvas.bottom <= bottom + 1;
    if (markShown(0) && canvas.top >= top - 1 && (!together || wholeShown)) return;
    if (together) down.scrollBy({top: controls - top});
    else if (markShown(canvas.top - top)) down.scrollBy({top: canvas.top - top});
    else down.scrollBy({top: y - (top + bottom) / 2});
};
setTimeout(() => scroll(20), 50);
