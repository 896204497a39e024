"""Node.js: the runner protocol, the supervised pool of runner processes, the npm dependency
store, and the JavaScript runner itself (js/). Never imports storage or the engine."""
