"""``accelsched ui``: the accelerator map, why Pending, and what-if, as a local read-only web page.

The page reads the same Session every other mode builds (state.py runs it, view.py shapes it for the page), served by
a small Starlette app (server.py) from assets shipped in the package (static/), with no build step and no CDN.
"""
