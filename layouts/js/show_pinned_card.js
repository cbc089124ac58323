// CustomJS on the diagram's Tap (args: source, fig).
// After a click on a box: clear the hover's tooltip (it would stay over the card that appears beside the diagram), then,
// once the part's card is on the page, scroll the page (the tabs' column below an open lesson, else the main area; not
// the cards' own scrolling column) by as little as
// shows the card's top half when it is out of view (below the diagram on a narrow screen), so the diagram's open
// block stays in view above it. Retried until the server has made the card.
const data = source.data;
const i = data.part.findIndex((_, j) => Math.abs(cb_obj.x - data.x[j]) <= data.width[j] / 2
                                     && Math.abs(cb_obj.y - data.y[j]) <= data.height[j] / 2);
if (i < 0) return;
const view = Bokeh.index.query_one(v => v.model === fig);
for (const tool of view ? view.tool_views.values() : []) if (tool._clear) tool._clear();
const wanted = "card-" + data.part[i].replaceAll(".", "-");
const find = root => {
    for (const el of root.querySelectorAll("*")) {
        if (el.classList.contains(wanted)) return el;
        const inner = el.shadowRoot && find(el.shadowRoot);
        if (inner) return inner;
    }
    return null;
};
const reveal = tries => {
    const card = find(document), box = card && card.getBoundingClientRect();
    if (!box || !box.height) {
        if (tries > 0) setTimeout(() => reveal(tries - 1), 150);
        return;
    }
    let page = document.getElementById("main");
    for (let el = card; el && el.id !== "main"; el = el.parentNode instanceof ShadowRoot ? el.parentNode.host
                                                                                      : el.parentNode)
        if (el instanceof Element && el.classList.contains("tabs-area") && el.scrollHeight > el.clientHeight) page = el;
    const shown = Math.min(box.height, window.innerHeight / 2);
    if (box.top < page.getBoundingClientRect().top || box.top + shown > window.innerHeight)
        page.scrollBy({top: box.top + shown - window.innerHeight + 16});
};
setTimeout(() => reveal(30), 100);
