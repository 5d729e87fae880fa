{%- extends 'base.tpl' -%}
{#- The course's Manage Assignments (publish/formgrader.py): what `course release` released, and the steps. -#}
{%- block title -%}
作业（Manage Assignments）
{%- endblock -%}
{%- block sidebar -%}
<li role="presentation" class="active"><a href="{{ base_url }}/formgrader/manage_assignments">作业</a></li>
<li role="presentation"><a href="{{ base_url }}/formgrader/gradebook">人工评分（Manual Grading）</a></li>
<li role="presentation"><a href="{{ base_url }}/formgrader/manage_students">学生（Manage Students）</a></li>
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li class="active">作业</li>
</ol>
{%- endblock -%}
{%- block messages -%}
<div class="alert alert-info" id="course-steps">
<p>本课程的作业由课程命令发布、收集和评分，这一页只列出已发布的作业。formgrader 用于<b>人工评分</b>（书面题和待复核的提交）：
在左侧“人工评分”中打开提交，逐个给分；待复核的提交在列表中带有旗标（Flagged），复核前它的自动评分不计入。</p>
<ol>
  <li>发布：<code>course release &lt;作业&gt;</code>，再 <code>course bundle &lt;作业&gt;</code> 打包发给学生</li>
  <li>收集：<code>course collect &lt;LMS 下载的 zip&gt; --assignment &lt;作业&gt;</code></li>
  <li>评分：<code>course grade &lt;作业&gt;</code>；复核：<code>course review</code>（或在这里逐个给分）</li>
  <li>反馈与成绩：<code>course feedback</code>、<code>course report</code>、<code>course export</code></li>
</ol>
<p>formgrader 自带的生成、发布、收集、自动评分和生成反馈按钮已去掉：它们会绕过课程的检查，或覆盖课程的中文反馈。</p>
</div>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th>作业</th>
  <th class="text-center">发布时间（UTC，course release）</th>
  <th class="text-center">notebook</th>
  <th class="text-center">提交数</th>
  <th class="text-center">人工评分</th>
</tr>
{%- endblock -%}
{%- block table_body -%}
{%- for a in assignments %}
<tr class="course-assignment">
  <td>{{ a.name }}</td>
  <td class="text-center">已发布 {{ a.released }}</td>
  <td class="text-center">{{ a.notebooks | join("、") }}</td>
  <td class="text-center">{{ a.submissions }}</td>
  <td class="text-center"><a href="{{ base_url }}/formgrader/gradebook/{{ a.name }}">打开</a></td>
</tr>
{%- else %}
<tr><td colspan="5">还没有发布任何作业：运行 <code>course release</code>。</td></tr>
{%- endfor %}
{%- endblock -%}
