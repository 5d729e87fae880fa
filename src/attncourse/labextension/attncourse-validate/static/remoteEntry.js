// The course's Validate button, a JupyterLab 4 prebuilt extension written without a bundler: a module-federation
// container (init/get, as JupyterLab's bootstrap.js loads every prebuilt extension) that takes JupyterLab's own
// shared modules from the share scope. The button saves the notebook, asks the server extension
// attncourse.validate (POST attncourse/validate) and shows its Chinese report; tracebacks only when unfolded.
(function () {
  let scope;

  async function shared(name) {
    const versions = scope[name];
    const latest = Object.keys(versions).sort().pop();
    return (await versions[latest].get())();
  }

  function text(tag, content, className) {
    const node = document.createElement(tag);
    node.textContent = content;
    if (className) node.className = className;
    return node;
  }

  function plugin(apputils, services, widgets) {
    const { Dialog, ToolbarButton, showDialog } = apputils;
    const { ServerConnection } = services;

    // The headline (the counts) first and always in view; the list and the tracebacks scroll in boxes under it,
    // so that the dialog stays within a 1280x800 screen however many questions failed.
    function scrolling(content) {
      const pre = text('pre', content);
      Object.assign(pre.style, { whiteSpace: 'pre-wrap', maxHeight: '45vh', overflowY: 'auto', margin: '0' });
      return pre;
    }

    function body(result) {
      const node = document.createElement('div');
      node.className = 'attncourse-validate';
      const headline = text('p', result.headline, 'attncourse-validate-headline');
      Object.assign(headline.style, { fontWeight: 'bold', fontSize: '1.1em', margin: '0 0 0.75em 0' });
      node.appendChild(headline);
      node.appendChild(scrolling(result.summary));
      if (result.details) {
        const more = document.createElement('details');
        more.appendChild(text('summary', '详细信息（traceback，一般不需要看）'));
        more.appendChild(scrolling(result.details));
        node.appendChild(more);
      }
      return new widgets.Widget({ node });
    }

    async function validate(panel, button) {
      button.enabled = false;
      try {
        await panel.context.save();
        const settings = ServerConnection.makeSettings();
        const response = await ServerConnection.makeRequest(settings.baseUrl + 'attncourse/validate', {
          method: 'POST', body: JSON.stringify({ path: panel.context.path })
        }, settings);
        const result = await response.json();
        if (!response.ok) throw new Error(result.message || response.statusText);
        await showDialog({ title: '验证结果（Validate）', body: body(result), buttons: [Dialog.okButton()] });
      } catch (error) {
        await showDialog({ title: '验证没有完成', body: String(error), buttons: [Dialog.okButton()] });
      } finally {
        button.enabled = true;
      }
    }

    return {
      id: 'attncourse-validate:plugin',
      autoStart: true,
      activate: app => {
        app.docRegistry.addWidgetExtension('Notebook', {
          createNew: panel => {
            const button = new ToolbarButton({
              className: 'attncourse-validate-button', label: 'Validate（验证）',
              tooltip: '运行可见测试，按题列出通过、未通过和未作答', onClick: () => validate(panel, button)
            });
            panel.toolbar.insertItem(10, 'attncourse-validate', button);
            return button;
          }
        });
      }
    };
  }

  const container = {
    init: shareScope => { scope = shareScope; },
    get: async module => {
      if (module !== './extension') throw new Error(`attncourse-validate has no module ${module}`);
      const [apputils, services, widgets] = await Promise.all(
        ['@jupyterlab/apputils', '@jupyterlab/services', '@lumino/widgets'].map(shared));
      const extension = { __esModule: true, default: plugin(apputils, services, widgets) };
      return () => extension;
    }
  };
  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB['attncourse-validate'] = container;
})();
